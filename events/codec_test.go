package events_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/stretchr/testify/require"
)

func TestRoundTripEveryType(t *testing.T) {
	for typ, p := range samples() {
		t.Run(typ, func(t *testing.T) {
			e := sampleEvent(p, 3)
			b, err := events.Encode(e)
			require.NoError(t, err)
			got, err := events.Decode(b)
			require.NoError(t, err)
			require.Equal(t, e, got)
		})
	}
}

// raw builds an encoded event by hand, so tests can break it on purpose.
func raw(typ string, schema int, data string) []byte {
	return []byte(`{"type":"` + typ + `","schema":` + itoa(schema) + `,"id":"` + sampleID(1) +
		`","job":"` + sampleJob + `","version":1,"time":"2026-12-02T14:00:00Z","data":` + data + `}`)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		is      error
		mention []string
	}{
		{"unknown type", raw("KeyMelted", 1, `{}`), events.ErrUnknownType, []string{"KeyMelted", "schema 1", sampleJob}},
		{"newer schema", raw("Sent", 2, `{}`), events.ErrNewerSchema, []string{"Sent", "schema 2", sampleJob}},
		{"old schema without upcaster", raw("Sent", 0, `{}`), events.ErrMissingUpcast, []string{"Sent", "schema 0", sampleJob}},
		{"negative schema", raw("Sent", -1, `{}`), events.ErrMalformed, []string{"Sent", sampleJob}},
		{"unknown field", raw("Sent", 1, `{"key":"k","colour":"red"}`), events.ErrMalformed, []string{"Sent", "colour", sampleJob}},
		{"wrong field type", raw("Sent", 1, `{"try":"one"}`), events.ErrMalformed, []string{"Sent", sampleJob}},
		{"missing data", []byte(`{"type":"Sent","schema":1,"id":"` + sampleID(1) + `","job":"` + sampleJob + `","version":1,"time":"2026-12-02T14:00:00Z"}`), events.ErrMalformed, []string{"Sent", "data is missing"}},
		{"null data", []byte(`{"type":"ObservationStored","schema":1,"id":"` + sampleID(1) + `","job":"` + sampleJob + `","version":1,"time":"2026-12-02T14:00:00Z","data":null}`), events.ErrMalformed, []string{"ObservationStored", "data is missing"}},
		{"bad event id", []byte(`{"type":"Sent","schema":1,"id":"nope","job":"` + sampleJob + `","version":1,"time":"2026-12-02T14:00:00Z","data":{}}`), events.ErrMalformed, []string{"Sent", "ULID"}},
		{"bad job id", []byte(`{"type":"Sent","schema":1,"id":"` + sampleID(1) + `","job":"a.b","version":1,"time":"2026-12-02T14:00:00Z","data":{}}`), events.ErrMalformed, []string{"a.b"}},
		{"version zero", []byte(`{"type":"Sent","schema":1,"id":"` + sampleID(1) + `","job":"` + sampleJob + `","version":0,"time":"2026-12-02T14:00:00Z","data":{}}`), events.ErrMalformed, []string{"version"}},
		{"not json", []byte(`Sent please`), events.ErrMalformed, []string{"unknown type"}},
		{"trailing data", append(raw("Sent", 1, `{}`), []byte(` {}`)...), events.ErrMalformed, []string{"trailing"}},
		{"unknown envelope field", []byte(`{"type":"Sent","schema":1,"extra":1}`), events.ErrMalformed, nil},
		{"empty", nil, events.ErrMalformed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := events.Decode(tt.in)
			require.Error(t, err)
			require.ErrorIs(t, err, tt.is)
			var de *events.DecodeError
			require.True(t, errors.As(err, &de))
			for _, m := range tt.mention {
				require.Contains(t, err.Error(), m)
			}
		})
	}
}

func TestEncodeRefusesBadEnvelope(t *testing.T) {
	good := sampleEvent(samples()[events.TypeSent], 1)
	tests := map[string]func(*events.Event){
		"no id":       func(e *events.Event) { e.ID = "" },
		"bad job":     func(e *events.Event) { e.JobID = "serp.events.x" },
		"long job":    func(e *events.Event) { e.JobID = strings.Repeat("a", 65) },
		"no version":  func(e *events.Event) { e.Version = 0 },
		"no time":     func(e *events.Event) { e.Time = time.Time{} },
		"no payload":  func(e *events.Event) { e.Data = nil },
		"alien thing": func(e *events.Event) { e.Data = alien{} },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			e := good
			mutate(&e)
			_, err := events.Encode(e)
			require.Error(t, err)
		})
	}
}

type alien struct{}

func (alien) EventType() string  { return "Alien" }
func (alien) SchemaVersion() int { return 1 }

// TestUpcast shows the hook for old schemas: a codec with an upcaster reads
// a schema-0 Sent whose lease was called "until", the zero codec refuses it.
func TestUpcast(t *testing.T) {
	old := raw("Sent", 0, `{"key":"k1","until":"2026-12-02T14:02:00Z"}`)
	// Schema 0 is below the first schema, so pretend the current one is 1
	// and the old one is 0 by registering an upcaster for 0.
	var c events.Codec
	c.Upcast(events.TypeSent, 0, func(data json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		m["lease_until"] = m["until"]
		delete(m, "until")
		return json.Marshal(m)
	})
	_, err := events.Decode(old)
	require.ErrorIs(t, err, events.ErrMissingUpcast)

	e, err := c.Decode(old)
	require.NoError(t, err)
	sent := e.Data.(events.Sent)
	require.Equal(t, "k1", sent.Key)
	require.Equal(t, "2026-12-02T14:02:00Z", sent.LeaseUntil.Format("2006-01-02T15:04:05Z07:00"))

	c.Upcast(events.TypeSent, 0, func(json.RawMessage) (json.RawMessage, error) { return nil, errors.New("cannot") })
	_, err = c.Decode(old)
	require.ErrorContains(t, err, "upcast from schema 0")
}

func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"type":"Sent","schema":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := events.Decode(b)
		if err != nil {
			var de *events.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error is not a *DecodeError: %v", err)
			}
			return
		}
		// Whatever decodes must encode and decode to the same event.
		again, err := events.Encode(e)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		e2, err := events.Decode(again)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if e2.Type() != e.Type() || e2.ID != e.ID || e2.Version != e.Version || !e2.Time.Equal(e.Time) {
			t.Fatalf("round trip changed the envelope: %+v vs %+v", e, e2)
		}
	})
}
