package transport

import (
	"errors"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// TestInboundSplitScan: split keeps a batch's elements or refuses it whole (a broken
// batch, one too long), and scan keeps each element's own error, once per element.
func TestInboundSplitScan(t *testing.T) {
	var in inbound
	if batch, err := in.split([]byte(`[{"jsonrpc":"2.0","id":1,"method":"a"},{"x":1},{"jsonrpc":"2.0","method":"n"}]`), 3); !batch || err != nil {
		t.Fatalf("split = %v %v", batch, err)
	}
	requests, invalid := in.scan()
	if requests != 1 || invalid != 1 || in.errs[0] != nil || in.errs[2] != nil || !errors.Is(in.errs[1], codec.ErrInvalidRequest) {
		t.Errorf("scan = %d requests, %d invalid, errors %v", requests, invalid, in.errs)
	}
	if in.msgs[1].Kind != codec.KindInvalid || in.firstError() != in.errs[1] {
		t.Errorf("invalid element: kind %v, first error %v", in.msgs[1].Kind, in.firstError())
	}
	var le *batchLimitError
	if _, err := in.split([]byte(`[1,2,3,4]`), 3); !errors.As(err, &le) || err.Error() != "batch too long: at most 3 elements" {
		t.Errorf("batch too long: %v", err)
	}
	if _, err := in.split([]byte(`[1,`), 3); !errors.Is(err, codec.ErrParse) {
		t.Errorf("broken batch: %v", err)
	}
	in.reset()
	// A pooled unit that carried a stdio batch element by element (handOne) holds room
	// for one message and no errors: scan must still fit both.
	in = inbound{msgs: make([]codec.Message, 0, 1)}
	if batch, err := in.split([]byte(`{"jsonrpc":"2.0","id":1,"method":"a"}`), 3); batch || err != nil {
		t.Fatalf("split single = %v %v", batch, err)
	}
	if requests, invalid := in.scan(); requests != 1 || invalid != 0 {
		t.Errorf("scan single = %d %d", requests, invalid)
	}
}

// TestErrorParts: one wording for each inbound error.
func TestErrorParts(t *testing.T) {
	var in inbound
	_, err := in.split([]byte(`[1,`), 3)
	if code, msg, data := errorParts(err, nil); code != codec.CodeParseError || msg != "Parse error" || string(data) == "" {
		t.Errorf("broken batch: %d %q %s", code, msg, data)
	}
	if code, msg, data := errorParts(&batchLimitError{max: 2}, nil); code != codec.CodeInvalidRequest || msg != "batch too long: at most 2 elements" || data != nil {
		t.Errorf("batch too long: %d %q %s", code, msg, data)
	}
}
