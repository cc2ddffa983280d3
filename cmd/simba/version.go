//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// versionInfo is what simba version prints, also its JSON form.
type versionInfo struct {
	Version    string `json:"version"`               // the module version, "(devel)" when built in its repository
	Go         string `json:"go"`                    // the Go version simba was built with
	Commit     string `json:"commit,omitempty"`      // the VCS revision, when the build recorded it
	CommitTime string `json:"commit_time,omitempty"` // its time, RFC 3339
	Modified   bool   `json:"modified,omitempty"`    // the working tree had changes
}

// buildVersion reads simba's version from its build information.
func buildVersion() versionInfo {
	v := versionInfo{Version: "(unknown)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// cmdVersion implements simba version and simba --version.
func (c *cli) cmdVersion(f *flags) error {
	if len(f.args) > 0 {
		return fail(codeUsage, "version: takes no arguments")
	}
	v := buildVersion()
	if f.json {
		return json.NewEncoder(c.stdout).Encode(v)
	}
	line := []string{"simba", v.Version, v.Go}
	if v.Commit != "" {
		line = append(line, "commit", v.Commit)
		if v.CommitTime != "" {
			line = append(line, v.CommitTime)
		}
		if v.Modified {
			line = append(line, "(modified)")
		}
	}
	_, err := fmt.Fprintln(c.stdout, strings.Join(line, " "))
	return err
}
