package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binary returns the serpent binary a chaos run starts: path if given; the
// running program if it is serpent (serpent chaos); else one built with
// "go build" into dir (tests, go run).
func Binary(ctx context.Context, path, dir string) (string, error) {
	if path != "" {
		return filepath.Abs(path)
	}
	if self, err := os.Executable(); err == nil && strings.HasPrefix(filepath.Base(self), "serpent") &&
		!strings.HasSuffix(self, ".test") {
		return self, nil
	}
	out := filepath.Join(dir, "serpent")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/serpent-engine/serpent/cmd/serpent")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: go build serpent: %v\n%s", err, b)
	}
	return out, nil
}
