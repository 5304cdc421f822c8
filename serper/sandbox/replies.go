package sandbox

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
)

// cachedReply is a response as the API stores it under a key: the exact
// status and body a replay sends again.
type cachedReply struct {
	status    int
	body      []byte
	requestID string
}

// envelope encodes the API's error envelope.
func envelope(code, message, requestID string, fields []string) []byte {
	type errBody struct {
		Code      string   `json:"code"`
		Message   string   `json:"message"`
		RequestID string   `json:"requestId"`
		Fields    []string `json:"fields,omitempty"`
	}
	b, _ := json.Marshal(struct {
		Error errBody `json:"error"`
	}{errBody{code, message, requestID, fields}})
	return b
}

func errorReply(status int, code, message, requestID string, fields []string) cachedReply {
	return cachedReply{status: status, body: envelope(code, message, requestID, fields), requestID: requestID}
}

// write sends r; replayed adds Idempotent-Replayed: true.
func (r cachedReply) write(w http.ResponseWriter, replayed bool) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(r.body))) // else a reply over 2 KB goes chunked
	h.Set("X-Request-Id", r.requestID)
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body)
}

// writeRateLimited sends a 429 with Retry-After in whole seconds (at least 1).
func writeRateLimited(w http.ResponseWriter, r cachedReply, retrySeconds int) {
	w.Header().Set("Retry-After", strconv.Itoa(max(retrySeconds, 1)))
	r.write(w, false)
}

// gatewayPage is what a load balancer in front of the API sends: HTML, no
// JSON, no request id.
func gatewayPage(w http.ResponseWriter, status int) {
	text := strconv.Itoa(status) + " " + http.StatusText(status)
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(status)
	_, _ = w.Write([]byte("<html>\r\n<head><title>" + text + "</title></head>\r\n<body>\r\n<center><h1>" + text +
		"</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"))
}

// drop closes the connection without a reply, with a reset where it can.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
			return
		}
	}
	// Not hijackable (HTTP/2, a recorder): abort the response instead.
	panic(http.ErrAbortHandler)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, envelope("internal", "could not encode the reply", "", nil)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
