package serper_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// Example sends one stored body under one attempt key to a sandbox, loses
// nothing by sending it again, and finds the single charge in the ledger.
func Example() {
	sb := sandbox.New(sandbox.Config{Seed: 1})
	url, err := sb.Start("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer sb.Close()

	client, err := serper.New(serper.Config{BaseURL: url, Token: sandbox.DefaultToken})
	if err != nil {
		panic(err)
	}
	defer client.CloseIdleConnections()
	ctx := context.Background()
	key := "0d9f1c34-5a8e-4b7a-9c61-2f3e4d5c6b7a"
	body := []byte(`{"query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10}`)

	first := client.Search(ctx, key, body)
	fmt.Println("first:", first.Confirmed, first.Status, "pages", first.Pages, "replayed", first.Replayed)

	again := client.Search(ctx, key, body)
	fmt.Println("again:", again.Confirmed, again.Status, "replayed", again.Replayed, "same request", again.RequestID == first.RequestID)

	entries, err := client.Ledger(ctx, serper.LedgerQuery{Keys: []string{key}})
	if err != nil {
		panic(err)
	}
	fmt.Println("charges:", len(entries), "billed pages", entries[0].BilledPages, "amount", entries[0].AmountMicros)
	fmt.Println("timeout", client.Config().Timeout, "token printed:", strings.Contains(fmt.Sprint(client), sandbox.DefaultToken))
	// Output:
	// first: true 200 pages 1 replayed false
	// again: true 200 replayed true same request true
	// charges: 1 billed pages 1 amount 1000
	// timeout 1m40s token printed: false
}
