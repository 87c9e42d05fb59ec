package storagewrap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestUpstreamReviewed fails when go.mod pins k8s.io/apiserver or
// k8s.io/apimachinery at a version the wrappers were not reviewed against.
func TestUpstreamReviewed(t *testing.T) {
	pinned, err := pinnedVersions()
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, module := range reviewedModules {
		if pinned[module] != reviewedAPIServerVersion {
			changed = append(changed, module+" "+pinned[module])
		}
	}
	if len(changed) > 0 {
		t.Error(reviewMessage(changed))
	}
}

// pinnedVersions are the versions go.mod pins its modules at (a
// replacement's, if any). A test binary's build information lists no
// dependencies, so go.mod is read.
func pinnedVersions() (map[string]string, error) {
	goMod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		return nil, err
	}
	return parseGoMod(string(goMod)), nil
}

// parseGoMod reads the require and replace directives of a go.mod, single
// or in blocks. A module replaced by a directory is "replaced by" it.
func parseGoMod(goMod string) map[string]string {
	pinned := map[string]string{}
	var replaces [][2][]string // old and new fields of each replace
	block := ""
	for _, line := range strings.Split(goMod, "\n") {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		directive := block
		switch {
		case len(fields) == 0:
			continue
		case block != "":
			if fields[0] == ")" {
				block = ""
				continue
			}
		case len(fields) == 2 && fields[1] == "(":
			block = fields[0]
			continue
		default:
			directive, fields = fields[0], fields[1:]
		}
		switch directive {
		case "require":
			if len(fields) >= 2 {
				pinned[fields[0]] = fields[1]
			}
		case "replace":
			old, replacement, ok := strings.Cut(strings.Join(fields, " "), "=>")
			if ok {
				replaces = append(replaces, [2][]string{strings.Fields(old), strings.Fields(replacement)})
			}
		}
	}
	for _, r := range replaces {
		old, replacement := r[0], r[1]
		switch {
		case len(old) == 0 || len(replacement) == 0:
		case len(old) == 2 && pinned[old[0]] != old[1]:
			// another version's replacement
		case len(replacement) == 2:
			pinned[old[0]] = replacement[1]
		default:
			pinned[old[0]] = "replaced by " + replacement[0]
		}
	}
	return pinned
}

func reviewMessage(changed []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "go.mod pins %s, but mydb's storage wrappers, and the other code of mydb that relies on "+
		"k8s.io/apiserver's internals, were last reviewed against %s.\n"+
		"Read each upstream file below at the pinned version, change mydb's code where upstream's changed under it, "+
		"then set reviewedAPIServerVersion (pkg/storagewrap/upstream.go) to the pinned version:\n",
		strings.Join(changed, " and "), reviewedAPIServerVersion)
	for _, d := range upstream {
		fmt.Fprintf(&b, "\n%s (%s)\n", d.code, d.file)
		for _, u := range d.upstream {
			fmt.Fprintf(&b, "    %s\n", u)
		}
		fmt.Fprintf(&b, "  relies on: %s\n", d.relies)
	}
	return b.String()
}

// TestUpstreamNamesRealCode: every file the review list names exists, with
// the identifier it names: mydb's at this commit, upstream's in the module
// cache at the pinned version, when the module cache has it.
func TestUpstreamNamesRealCode(t *testing.T) {
	pinned, err := pinnedVersions()
	if err != nil {
		t.Fatal(err)
	}
	modCache := ""
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		modCache = strings.TrimSpace(string(out))
	}
	for _, d := range upstream {
		src, err := os.ReadFile(filepath.Join("..", "..", d.file))
		if err != nil {
			t.Errorf("%s: %v", d.code, err)
			continue
		}
		for _, name := range strings.Split(d.code, ", ") {
			if !strings.Contains(string(src), name) {
				t.Errorf("%s does not name %s", d.file, name)
			}
		}
		for _, u := range d.upstream {
			file, identifier, ok := strings.Cut(u, " ")
			parts := strings.SplitN(file, "/", 3)
			if !ok || len(parts) != 3 {
				t.Errorf("%s: %q is not \"module/path/file.go Identifier\"", d.code, u)
				continue
			}
			module := parts[0] + "/" + parts[1]
			if pinned[module] == "" {
				t.Errorf("%s: %s is not a module mydb builds with", d.code, module)
				continue
			}
			dir := filepath.Join(modCache, module+"@"+pinned[module])
			if _, err := os.Stat(dir); modCache == "" || err != nil {
				t.Logf("%s@%s is not in the module cache; %s not checked", module, pinned[module], u)
				continue
			}
			src, err := os.ReadFile(filepath.Join(dir, parts[2]))
			if err != nil {
				t.Errorf("%s: %s at %s: %v", d.code, u, pinned[module], err)
				continue
			}
			if !strings.Contains(string(src), identifier) {
				t.Errorf("%s: %s at %s has no %s", d.code, file, pinned[module], identifier)
			}
		}
	}
}

func TestParseGoMod(t *testing.T) {
	got := parseGoMod(`module example.com/m

go 1.26.0

require example.com/single v1.0.0

require (
	k8s.io/apiserver v0.37.2
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/api v0.37.2
)

replace k8s.io/apimachinery => k8s.io/apimachinery v0.37.3

replace (
	k8s.io/api => ../api
	k8s.io/apiserver v0.36.0 => k8s.io/apiserver v0.36.1
)
`)
	want := map[string]string{
		"example.com/single":  "v1.0.0",
		"k8s.io/apiserver":    "v0.37.2",
		"k8s.io/apimachinery": "v0.37.3",
		"k8s.io/api":          "replaced by ../api",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %v, want %v", got, want)
	}
}
