package projectionstest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// BenchResult is a result body of the size the sandbox returns: ten
// organic results, about 2 KB. The benchmarks store it in their jobs.
var BenchResult = func() []byte {
	var b strings.Builder
	b.WriteString(`{"requestId":"req_bench","search":{"query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10},"organic":[`)
	for i := 1; i <= 10; i++ {
		if i > 1 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"position":%d,"title":"Best espresso scale of the year, tested and reviewed","link":"https://news.example.net/espresso-scale/%d","snippet":"We weighed every espresso scale on the market so you do not have to."}`, i, 1000+i)
	}
	b.WriteString(`],"pages":1,"searchedAt":"2026-12-02T14:00:00Z"}`)
	return []byte(b.String())
}()

// BenchJob is the i-th job of a benchmark's log, its events encoded one
// by one: a plain success, a lost reply resent with the same key (5 jobs
// in 20), or a 408 and a new key (3 in 20).
func BenchJob(tb testing.TB, ids *IDs, i int) [][]byte {
	j := NewJob(tb, ids, "bench "+strconv.Itoa(i), T0.Add(time.Duration(i%1440)*time.Minute))
	j.Send()
	switch i % 20 {
	case 0, 1, 2, 3, 4:
		j.Reply(aggregate.Outcome{Unknown: "timeout"})
		j.Send()
	case 5, 6, 7:
		j.Reply(aggregate.Outcome{Status: 408, Code: "search_timeout", RequestID: "req_t" + strconv.Itoa(i)})
		j.Send()
	}
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_" + strconv.Itoa(i), Result: BenchResult, Pages: 1})
	out := make([][]byte, len(j.Log))
	for k, e := range j.Log {
		enc, err := events.Encode(e)
		if err != nil {
			tb.Fatal(err)
		}
		out[k] = enc
	}
	return out
}
