package audit

import (
	"hash/maphash"
	"math"
)

// index finds a job's place in the auditor's jobs by its ID. It is a hash
// table of places, open addressed: a slot holds a place plus one (a
// uint32: places up to 4,294,967,294), 0 when free, and a job's ID is read
// from the jobs themselves. Its slots are at most three quarters used, and
// jobs handed over at once are given just enough: about 5.3 bytes a job,
// where a map from IDs to places took 33.
type index struct {
	seed  maphash.Seed
	slots []uint32
}

// home is the slot where the search for id starts.
func (x *index) home(id string) int {
	h := maphash.String(x.seed, id) >> 32
	return int(h * uint64(len(x.slots)) >> 32) // h scaled to the slots, without a division
}

// next is the slot after i, the first after the last.
func (x *index) next(i int) int {
	if i++; i == len(x.slots) {
		return 0
	}
	return i
}

// find returns the place in jobs of the job with ID id, or -1 and the free
// slot where add puts it.
func (x *index) find(jobs []Job, id string) (place, slot int) {
	if len(x.slots) == 0 {
		return -1, -1
	}
	for i := x.home(id); ; i = x.next(i) {
		switch p := x.slots[i]; {
		case p == 0:
			return -1, i
		case jobs[p-1].ID == id:
			return int(p - 1), i
		}
	}
}

// add records place at slot, a free slot find returned since the last
// reserve.
func (x *index) add(slot, place int) {
	if place >= math.MaxUint32 {
		panic("audit: more jobs than the index holds")
	}
	x.slots[slot] = uint32(place + 1)
}

// reserve makes room for n jobs, jobs being those recorded so far, each at
// its place. It makes room for at least twice as many as recorded, so a
// job added at a time is recorded in constant time on average.
func (x *index) reserve(jobs []Job, n int) {
	if n*4 <= len(x.slots)*3 {
		return
	}
	if x.slots == nil {
		x.seed = maphash.MakeSeed()
	}
	n = max(n, 2*len(jobs), 6)
	x.slots = make([]uint32, n*4/3+1)
	for p := range jobs {
		i := x.home(jobs[p].ID)
		for x.slots[i] != 0 {
			i = x.next(i)
		}
		x.slots[i] = uint32(p + 1)
	}
}
