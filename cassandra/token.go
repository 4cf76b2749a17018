package cassandra

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Token is the Murmur3Partitioner token of a text partition key holding id: the value that
// `SELECT token(k)` returns in CQL, and the clustering value instance_id_token that every
// writer stores next to instance_id in es_instances_by_retry_window. Workers compare it with
// the token ranges they lease, so it must match Cassandra bit for bit.
//
// A text key is hashed as its UTF-8 bytes. Cassandra refuses an empty partition key, so an
// empty id has no token in Cassandra; Token("") still returns the hash of no bytes.
func Token(id string) int64 {
	return normalizeToken(murmur3H1([]byte(id)))
}

// normalizeToken maps a hash to a token: the partitioner reserves math.MinInt64 as the ring's
// minimum token, which no key may have, and gives such a key math.MaxInt64 instead.
func normalizeToken(h int64) int64 {
	if h == math.MinInt64 {
		return math.MaxInt64
	}
	return h
}

const (
	murmurC1 = 0x87c37b91114253d5
	murmurC2 = 0x4cf5ad432745937f
)

// murmur3H1 is the first 64 bits of MurmurHash3 x64 128 with seed 0, in the variant Cassandra
// ships: the tail bytes (the last len%16) are widened as SIGNED Java bytes before shifting, so
// a byte >= 0x80 drags ones into the higher bits. The 16-byte blocks are read as unsigned
// little-endian words, as in the reference algorithm.
func murmur3H1(data []byte) int64 {
	var h1, h2 uint64
	n := len(data)
	blocks := n / 16
	for i := 0; i < blocks; i++ {
		k1 := binary.LittleEndian.Uint64(data[i*16:])
		k2 := binary.LittleEndian.Uint64(data[i*16+8:])

		h1 ^= mixK1(k1)
		h1 = bits.RotateLeft64(h1, 27) + h2
		h1 = h1*5 + 0x52dce729

		h2 ^= mixK2(k2)
		h2 = bits.RotateLeft64(h2, 31) + h1
		h2 = h2*5 + 0x38495ab5
	}

	tail := data[blocks*16:]
	var k1, k2 uint64
	for i := len(tail) - 1; i >= 0; i-- {
		signed := uint64(int64(int8(tail[i]))) // Java's (long) of a byte
		if i >= 8 {
			k2 ^= signed << (8 * uint(i-8))
		} else {
			k1 ^= signed << (8 * uint(i))
		}
	}
	if len(tail) > 8 {
		h2 ^= mixK2(k2)
	}
	if len(tail) > 0 {
		h1 ^= mixK1(k1)
	}

	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix64(h1)
	h2 = fmix64(h2)
	h1 += h2
	return int64(h1)
}

func mixK1(k uint64) uint64 {
	k *= murmurC1
	k = bits.RotateLeft64(k, 31)
	return k * murmurC2
}

func mixK2(k uint64) uint64 {
	k *= murmurC2
	k = bits.RotateLeft64(k, 33)
	return k * murmurC1
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
