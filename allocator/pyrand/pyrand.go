// Package pyrand is a port of CPython's random.Random: the MT19937 generator
// seeded from an integer the way CPython seeds it (init_by_array over the
// integer's 32-bit words), and the methods Gavel's simulator draws from
// (random, getrandbits, randrange/choice through rejection sampling,
// shuffle, uniform). Same seed, same sequence as CPython 3.
package pyrand

import "math/bits"

const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// Random is one generator. It is not safe for concurrent use.
type Random struct {
	mt  [n]uint32
	mti int
}

// New returns a generator seeded like CPython's random.Random(seed) for an
// int seed. Negative seeds use their absolute value, as CPython does.
func New(seed int64) *Random {
	r := &Random{}
	r.Seed(seed)
	return r
}

// Seed reseeds the generator (CPython's random.seed(int)).
func (r *Random) Seed(seed int64) {
	u := uint64(seed)
	if seed < 0 {
		u = uint64(-seed) // abs; -MinInt64 wraps to itself, which is its abs as uint64
	}
	key := []uint32{uint32(u)}
	if hi := uint32(u >> 32); hi != 0 {
		key = append(key, hi)
	}
	r.initByArray(key)
}

func (r *Random) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < n; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.mti = n
}

func (r *Random) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	k := n
	if len(key) > k {
		k = len(key)
	}
	for ; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = n - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
}

// Uint32 is genrand_uint32: the next 32 random bits.
func (r *Random) Uint32() uint32 {
	if r.mti >= n {
		var kk int
		for kk = 0; kk < n-m; kk++ {
			y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
			r.mt[kk] = r.mt[kk+m] ^ (y >> 1) ^ (uint32(-(int32(y & 1))) & matrixA)
		}
		for ; kk < n-1; kk++ {
			y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
			r.mt[kk] = r.mt[kk+(m-n)] ^ (y >> 1) ^ (uint32(-(int32(y & 1))) & matrixA)
		}
		y := (r.mt[n-1] & upperMask) | (r.mt[0] & lowerMask)
		r.mt[n-1] = r.mt[m-1] ^ (y >> 1) ^ (uint32(-(int32(y & 1))) & matrixA)
		r.mti = 0
	}
	y := r.mt[r.mti]
	r.mti++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// Random is random.random(): a float in [0, 1) with 53 random bits.
func (r *Random) Random() float64 {
	a := r.Uint32() >> 5
	b := r.Uint32() >> 6
	return (float64(a)*67108864.0 + float64(b)) * (1.0 / 9007199254740992.0)
}

// GetRandBits is random.getrandbits(k) for 0 <= k <= 64: 32-bit words are
// drawn least significant first and the last one keeps its top bits.
func (r *Random) GetRandBits(k int) uint64 {
	if k < 0 || k > 64 {
		panic("pyrand: GetRandBits wants 0 <= k <= 64")
	}
	if k == 0 {
		return 0
	}
	if k <= 32 {
		return uint64(r.Uint32() >> (32 - k))
	}
	lo := uint64(r.Uint32())
	hi := uint64(r.Uint32() >> (64 - k))
	return hi<<32 | lo
}

// RandBelow is random._randbelow(n) for n > 0: getrandbits(n.bit_length())
// redrawn until it is below n.
func (r *Random) RandBelow(nn uint64) uint64 {
	if nn == 0 {
		panic("pyrand: RandBelow(0)")
	}
	k := bits.Len64(nn)
	x := r.GetRandBits(k)
	for x >= nn {
		x = r.GetRandBits(k)
	}
	return x
}

// RandRange is random.randrange(start, stop) with step 1.
func (r *Random) RandRange(start, stop int64) int64 {
	if stop <= start {
		panic("pyrand: empty range for RandRange")
	}
	return start + int64(r.RandBelow(uint64(stop-start)))
}

// Choice is the index random.choice(seq) picks from a sequence of length l.
func (r *Random) Choice(l int) int {
	return int(r.RandBelow(uint64(l)))
}

// Shuffle is random.shuffle over a sequence of length l, calling swap like
// sort.Slice's swap.
func (r *Random) Shuffle(l int, swap func(i, j int)) {
	for i := l - 1; i >= 1; i-- {
		j := int(r.RandBelow(uint64(i + 1)))
		swap(i, j)
	}
}

// Uniform is random.uniform(a, b) = a + (b-a)*random().
func (r *Random) Uniform(a, b float64) float64 {
	return a + (b-a)*r.Random()
}

// State is the generator's internal state (CPython's getstate: the 624
// words and the position), for saving and restoring it exactly.
func (r *Random) State() []uint32 {
	s := make([]uint32, n+1)
	copy(s, r.mt[:])
	s[n] = uint32(r.mti)
	return s
}

// SetState restores a State (CPython's setstate); it reports whether s is
// one.
func (r *Random) SetState(s []uint32) bool {
	if len(s) != n+1 || s[n] > n {
		return false
	}
	copy(r.mt[:], s[:n])
	r.mti = int(s[n])
	return true
}
