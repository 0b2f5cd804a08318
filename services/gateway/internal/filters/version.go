package filters

import (
	"encoding/json"
	"net/http"
	"runtime"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/version"
)

// The Kubernetes version the gateway serves: the API machinery it is built
// on. kubectl compares its minor version with the server's.
const (
	kubeMajor      = "1"
	kubeMinor      = "37"
	kubeGitVersion = "v1.37.0-kplane"
)

// VersionInfo is the gateway's version.Info: kube's version it serves and
// the build's commit, tree state and date from the Go build info.
func VersionInfo() version.Info {
	info := version.Info{
		Major:        kubeMajor,
		Minor:        kubeMinor,
		GitVersion:   kubeGitVersion,
		GitTreeState: "",
		BuildDate:    "1970-01-01T00:00:00Z",
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.GitCommit = s.Value
		case "vcs.time":
			info.BuildDate = s.Value
		case "vcs.modified":
			info.GitTreeState = "clean"
			if s.Value == "true" {
				info.GitTreeState = "dirty"
			}
		}
	}
	return info
}

// VersionHandler serves info as kube's /version does: indented JSON, open
// to anonymous clients.
func VersionHandler(info version.Info) http.Handler {
	body, err := json.MarshalIndent(info, "", "  ")
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err != nil {
			http.Error(w, "encode version: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
}
