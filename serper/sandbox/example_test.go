package sandbox_test

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

// Example shows the fault that makes retries dangerous: the search runs and
// is billed, then the connection drops. A resend under the same key replays
// the result; the stats show one execution and one charge.
func Example() {
	sb := sandbox.New(sandbox.Config{Seed: 1, Faults: sandbox.Faults{DropAfterSearch: 1}})
	url, err := sb.Start("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer sb.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	send := func() string {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/search",
			bytes.NewReader([]byte(`{"query":"espresso scale","limit":10}`)))
		req.Header.Set("Authorization", "Bearer "+sandbox.DefaultToken)
		req.Header.Set("Idempotency-Key", "0d9f1c34-5a8e-4b7a-9c61-2f3e4d5c6b7a")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return "no reply"
		}
		defer resp.Body.Close()
		return fmt.Sprintf("%d replayed=%s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}

	fmt.Println("first:", send())
	sb.SetFaults(sandbox.Faults{})
	fmt.Println("again:", send())
	st := sb.Stats()
	fmt.Println("executions:", st.Executions, "charges:", st.Charges, "replays:", st.Replays)
	// Output:
	// first: no reply
	// again: 200 replayed=true
	// executions: 1 charges: 1 replays: 1
}
