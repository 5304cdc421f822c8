package events

// DecodeMessage reads the events of a message of the log (DecodeAll) and
// checks its header against them (CheckHeader).
func DecodeMessage(header map[string][]string, data []byte) ([]Event, error) {
	return decodeMessage(header, data, DecodeAll)
}

// DecodeMessageLight is DecodeMessage with DecodeAllLight: results are
// left out.
func DecodeMessageLight(header map[string][]string, data []byte) ([]Event, error) {
	return decodeMessage(header, data, DecodeAllLight)
}

func decodeMessage(header map[string][]string, data []byte, decode func([]byte) ([]Event, error)) ([]Event, error) {
	evs, err := decode(data)
	if err != nil {
		return nil, err
	}
	if err := CheckHeader(header, evs); err != nil {
		return nil, err
	}
	return evs, nil
}

// MessageIDs lists the ids of the events a message holds: its message id
// when its type header names one event, the decoded ids otherwise.
func MessageIDs(header map[string][]string, data []byte) ([]string, error) {
	if id := first(header, HeaderMsgID); id != "" && HeaderEvents(first(header, HeaderType)) == 1 {
		return []string{id}, nil
	}
	evs, err := DecodeAll(data)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids, nil
}
