package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// The config file (--config FILE, or RETRYRING_CONFIG) is YAML keyed by the flags' names. A key
// at the top level whose value is a value or a list sets that flag for every subcommand that has
// it; a key that names a subcommand of retryring (coordinator, worker, ctl, ...) and holds a
// mapping is that subcommand's section, whose keys set its flags (and its own subcommands'
// flags: the ctl section serves every ctl command), winning over the top level:
//
//	log-level: info                # every subcommand with --log-level
//	coordinator:
//	  node-id: c1
//	  peers: c1=10.0.0.1:7400,c2=10.0.0.2:7400,c3=10.0.0.3:7400
//	  lease-ttl: 10s
//	ctl:
//	  coordinator: https://10.0.0.1:7480   # a value: the --coordinator flag of ctl
//	  token-file: /etc/retryring/admin-token
//	worker:
//	  coordinators: 10.0.0.1:7878,10.0.0.2:7878
//	  retry-policy: /etc/retryring/policy.yaml
//
// Sections are one level deep (the ctl section serves ctl status, ctl pause, ...); a flag that
// takes several values (ctl pause --impl) takes a list: impl: [payment, email].
// Flags given on the command line win over the environment, the environment over the file, and
// the file over the defaults. A key that no subcommand has as a flag, a section key that is not a
// flag of that subcommand, and a value the flag's type refuses (anywhere in the file, whatever
// the subcommand run) are one error naming the file, the line and the key.

// configFlag is the flag that names the config file; it is a persistent flag of the root command.
const configFlag = "config"

// maxConfigBytes bounds the config file.
const maxConfigBytes = 1 << 20

// configValue is one key of the file: its values (one, or a list's items) and its line.
type configValue struct {
	values []string
	list   bool
	line   int
}

// configFile is a parsed config file, not yet checked against the commands.
type configFile struct {
	name     string
	flat     map[string]configValue
	sections map[string]map[string]configValue
	// sectionLines are the lines of the section keys.
	sectionLines map[string]int
}

// configError is an error of the config file: "config FILE line N: message".
func configError(name string, line int, format string, args ...any) error {
	if line > 0 {
		return fmt.Errorf("config %s line %d: %s", name, line, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("config %s: %s", name, fmt.Sprintf(format, args...))
}

// parseConfig reads a config file named name in its errors. It checks the shape only: a mapping
// of keys to values, lists of values, or sections (mappings of keys to values or lists).
func parseConfig(name string, data []byte) (*configFile, error) {
	cf := &configFile{name: name, flat: map[string]configValue{}, sections: map[string]map[string]configValue{}, sectionLines: map[string]int{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return cf, nil // an empty file sets nothing
	case err != nil:
		return nil, configError(name, 0, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, configError(name, more.Line, "want one YAML document, found another")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return cf, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, configError(name, root.Line, "want a mapping of flag names to values at the top")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key, err := configKey(name, k)
		if err != nil {
			return nil, err
		}
		if v.Kind == yaml.MappingNode {
			if _, dup := cf.sections[key]; dup {
				return nil, configError(name, k.Line, "section %q given twice", key)
			}
			sec := map[string]configValue{}
			for j := 0; j+1 < len(v.Content); j += 2 {
				sk, err := configKey(name, v.Content[j])
				if err != nil {
					return nil, err
				}
				if _, dup := sec[sk]; dup {
					return nil, configError(name, v.Content[j].Line, "key %q given twice in section %q", sk, key)
				}
				val, err := configLeaf(name, key+"."+sk, v.Content[j+1])
				if err != nil {
					return nil, err
				}
				val.line = v.Content[j].Line
				sec[sk] = val
			}
			cf.sections[key], cf.sectionLines[key] = sec, k.Line
			continue
		}
		if _, dup := cf.flat[key]; dup {
			return nil, configError(name, k.Line, "key %q given twice", key)
		}
		val, err := configLeaf(name, key, v)
		if err != nil {
			return nil, err
		}
		val.line = k.Line
		cf.flat[key] = val
	}
	return cf, nil
}

func configKey(name string, k *yaml.Node) (string, error) {
	if k.Kind != yaml.ScalarNode || k.Value == "" {
		return "", configError(name, k.Line, "want a flag name as the key")
	}
	if k.Value == configFlag {
		return "", configError(name, k.Line, "key %q: a config file cannot name another config file", configFlag)
	}
	return k.Value, nil
}

// configLeaf reads a key's value: a scalar, or a list of scalars.
func configLeaf(name, key string, v *yaml.Node) (configValue, error) {
	scalar := func(n *yaml.Node) (string, error) {
		switch {
		case n.Kind == yaml.AliasNode && n.Alias != nil:
			n = n.Alias
		}
		if n.Kind != yaml.ScalarNode {
			return "", configError(name, n.Line, "key %q: want a value or a list of values, got %s", key, kindName(n))
		}
		if n.Tag == "!!null" {
			return "", configError(name, n.Line, "key %q: no value (leave the key out for the default)", key)
		}
		return n.Value, nil
	}
	if v.Kind == yaml.SequenceNode {
		out := configValue{list: true, values: []string{}}
		for _, item := range v.Content {
			s, err := scalar(item)
			if err != nil {
				return configValue{}, err
			}
			out.values = append(out.values, s)
		}
		return out, nil
	}
	s, err := scalar(v)
	if err != nil {
		return configValue{}, err
	}
	return configValue{values: []string{s}}, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return "something else"
}

// flagsOf returns every flag of cmd and its subcommands, by name (persistent ones included).
func flagsOf(cmd *cobra.Command) map[string][]*pflag.Flag {
	out := map[string][]*pflag.Flag{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		add := func(f *pflag.Flag) {
			if !slices.Contains(out[f.Name], f) {
				out[f.Name] = append(out[f.Name], f)
			}
		}
		c.LocalFlags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
	return out
}

// check refuses keys that are no flag where they stand, and values the flags' types refuse,
// against the whole command tree of root: a file shared by several subcommands is checked whole,
// whichever one runs.
func (cf *configFile) check(root *cobra.Command) error {
	all := flagsOf(root)
	subs := map[string]*cobra.Command{}
	for _, c := range root.Commands() {
		subs[c.Name()] = c
	}
	for _, key := range sortedKeys(cf.flat) {
		v := cf.flat[key]
		fs, ok := all[key]
		if !ok {
			return configError(cf.name, v.line, "unknown key %q: no retryring command has a flag --%s", key, key)
		}
		if err := checkValue(cf.name, key, v, fs); err != nil {
			return err
		}
	}
	for _, sec := range sortedKeys(cf.sections) {
		sub, ok := subs[sec]
		if !ok {
			return configError(cf.name, cf.sectionLines[sec], "unknown section %q: want a retryring command (%s) or a flag name with a value", sec, strings.Join(sortedKeys(subs), ", "))
		}
		own := flagsOf(sub)
		for key, f := range flagsOf(root) {
			if root.PersistentFlags().Lookup(key) != nil {
				own[key] = f // --config and other persistent flags of the root
			}
		}
		for _, key := range sortedKeys(cf.sections[sec]) {
			v := cf.sections[sec][key]
			fs, ok := own[key]
			if !ok {
				return configError(cf.name, v.line, "unknown key %q in section %q: retryring %s has no flag --%s", key, sec, sec, key)
			}
			if err := checkValue(cf.name, sec+"."+key, v, fs); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkValue checks v against every flag that the key may set.
func checkValue(name, key string, v configValue, fs []*pflag.Flag) error {
	for _, f := range fs {
		_, slice := f.Value.(pflag.SliceValue)
		if v.list && !slice {
			return configError(name, v.line, "key %q: --%s takes one value, not a list", key, f.Name)
		}
		for _, s := range v.values {
			if err := checkType(f.Value.Type(), s); err != nil {
				return configError(name, v.line, "key %q: %q is not a valid %s: %v", key, s, f.Value.Type(), err)
			}
		}
	}
	return nil
}

// checkType parses s as a flag of type typ would; types it does not know are checked when the
// value is set.
func checkType(typ, s string) error {
	var err error
	switch strings.TrimSuffix(typ, "Slice") {
	case "bool":
		_, err = strconv.ParseBool(s)
	case "int", "int64", "int32":
		_, err = strconv.ParseInt(s, 0, 64)
	case "uint", "uint64", "uint32":
		_, err = strconv.ParseUint(s, 0, 64)
	case "float64", "float32":
		_, err = strconv.ParseFloat(s, 64)
	case "duration":
		_, err = time.ParseDuration(s)
	}
	if ne := (*strconv.NumError)(nil); errors.As(err, &ne) {
		err = ne.Err
	}
	return err
}

// apply sets every flag of cmd that was given neither on the command line nor in the environment
// (skip) from the file: its section's key (the section of cmd's top-level subcommand), else the
// top-level key.
func (cf *configFile) apply(cmd *cobra.Command, skip func(*pflag.Flag) bool) error {
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	section := cf.sections[top.Name()]
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if firstErr != nil || f.Changed || skip(f) || f.Name == configFlag {
			return
		}
		v, ok := section[f.Name]
		key := top.Name() + "." + f.Name
		if !ok {
			v, ok = cf.flat[f.Name]
			key = f.Name
		}
		if !ok {
			return
		}
		markGiven(f)
		if sv, slice := f.Value.(pflag.SliceValue); slice {
			if err := sv.Replace(v.values); err != nil {
				firstErr = configError(cf.name, v.line, "key %q: %v", key, err)
			}
			return
		}
		if len(v.values) != 1 {
			firstErr = configError(cf.name, v.line, "key %q: --%s takes one value", key, f.Name)
			return
		}
		if err := f.Value.Set(v.values[0]); err != nil {
			firstErr = configError(cf.name, v.line, "key %q: %q: %v", key, v.values[0], err)
		}
	})
	return firstErr
}

// loadConfig reads, parses and checks the config file at path against root's commands.
func loadConfig(path string, root *cobra.Command) (*configFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config %s: larger than %d bytes", path, maxConfigBytes)
	}
	cf, err := parseConfig(path, data)
	if err != nil {
		return nil, err
	}
	if err := cf.check(root); err != nil {
		return nil, err
	}
	return cf, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
