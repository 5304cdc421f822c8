package accounts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Decode reads limits as serp_accounts and the --accounts file hold them,
// strictly: a JSON object of the known fields, each a number of its type,
// within the bounds. Anything else is refused, not read as "no limit": a
// misspelt field or a null would otherwise leave an account with none.
func Decode(data []byte) (Limits, error) {
	var l Limits
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return l, fmt.Errorf("limits: not a JSON object: %w", err)
	}
	if fields == nil {
		return l, errors.New("limits: null, not a JSON object")
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		switch {
		case !slices.Contains(fieldNames, name):
			// Exact names: the decoder below would take "MAX_IN_FLIGHT" too.
			errs = append(errs, fmt.Errorf("unknown field %q (the fields are %s)", name, strings.Join(fieldNames, ", ")))
		case bytes.Equal(bytes.TrimSpace(fields[name]), []byte("null")):
			errs = append(errs, fmt.Errorf("%s is null", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return l, oneLine(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Limits{}, fmt.Errorf("limits: %w", err)
	}
	if err := l.Validate(); err != nil {
		return Limits{}, oneLine(err)
	}
	return l, nil
}

// oneLine is err on one line (errors.Join puts each on its own), as a
// log field, a table cell or a readiness line shows it.
func oneLine(err error) error {
	return errors.New("limits: " + strings.ReplaceAll(err.Error(), "\n", "; "))
}

// fieldNames are the JSON names of the fields of Limits.
var fieldNames = func() []string {
	var names []string
	t := reflect.TypeFor[Limits]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}()
