// Package layers holds one test, TestLayers, which keeps the product apart from its harness: the
// code that ships (every package outside testkit/, bench/, e2e/, conformance/, docs/ and deploy/)
// imports nothing from the test kit or the benchmarks, and the shipped binary links no test kit
// package and no package that imports `testing`, except hashicorp/raft (its testing.go, an
// in-memory cluster for raft's own users, sits in the non-test part of the raft package).
//
// docs/architecture.md, "Layout", says which folder holds what; TestImportsGoDown reads its layer
// table and checks that every import between product folders goes down a layer.
package layers
