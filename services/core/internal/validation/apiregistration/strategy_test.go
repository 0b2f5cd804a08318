package apiregistration

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	"kplane.dev/libs/apiserver/rest"
)

func messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func remote() *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group:                "metrics.k8s.io",
			Version:              "v1beta1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"},
			CABundle:             []byte("pem"),
			GroupPriorityMinimum: 100,
			VersionPriority:      100,
		},
	}
}

func local() *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"},
		Spec:       apiregistrationv1.APIServiceSpec{Group: "apps", Version: "v1", GroupPriorityMinimum: 17800, VersionPriority: 15},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		obj    func() *apiregistrationv1.APIService
		mutate func(*apiregistrationv1.APIService)
		want   []string
	}{
		{name: "remote", obj: remote, mutate: func(*apiregistrationv1.APIService) {}},
		{name: "local", obj: local, mutate: func(*apiregistrationv1.APIService) {}},
		{
			name: "legacy core group",
			obj:  local,
			mutate: func(s *apiregistrationv1.APIService) {
				s.Name, s.Spec.Group = "v1.", ""
			},
		},
		{
			name:   "name does not match the spec",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Name = "v1.metrics.k8s.io" },
			want:   []string{"metadata.name: Invalid value: \"v1.metrics.k8s.io\": must be `spec.version+\".\"+spec.group`: \"v1beta1.metrics.k8s.io\""},
		},
		{
			name:   "name that is no path segment is left to the REST layer",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Name = "a/b" },
		},
		{
			name: "empty group with another version",
			obj:  local,
			mutate: func(s *apiregistrationv1.APIService) {
				s.Name, s.Spec.Group, s.Spec.Version = "v2.", "", "v2"
			},
			want: []string{"spec.group: Required value: only v1 may have an empty group and it better be legacy kube"},
		},
		{
			name: "group not a DNS subdomain",
			obj:  local,
			mutate: func(s *apiregistrationv1.APIService) {
				s.Name, s.Spec.Group = "v1.Apps", "Apps"
			},
			want: []string{`spec.group: Invalid value: "Apps": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		{
			name: "version not a DNS label",
			obj:  local,
			mutate: func(s *apiregistrationv1.APIService) {
				s.Name, s.Spec.Version = "1.apps", "1"
			},
			want: []string{`spec.version: Invalid value: "1": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		},
		{
			name:   "group priority zero",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.GroupPriorityMinimum = 0 },
			want:   []string{"spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000"},
		},
		{
			name:   "group priority too high",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.GroupPriorityMinimum = 20001 },
			want:   []string{"spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000"},
		},
		{
			name:   "group priority at the limit",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.GroupPriorityMinimum = 20000 },
		},
		{
			name:   "version priority negative",
			obj:    local,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.VersionPriority = -1 },
			want:   []string{"spec.versionPriority: Invalid value: -1: must be positive and less than 1000"},
		},
		{
			name:   "version priority too high",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.VersionPriority = 1001 },
			want:   []string{"spec.versionPriority: Invalid value: 1001: must be positive and less than 1000"},
		},
		{
			name:   "local with a CA bundle",
			obj:    local,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.CABundle = []byte("12345") },
			want:   []string{`spec.caBundle: Invalid value: "5 bytes": local APIServices may not have a caBundle`},
		},
		{
			name:   "local skipping TLS verification",
			obj:    local,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.InsecureSkipTLSVerify = true },
			want:   []string{"spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify"},
		},
		{
			name:   "service without namespace and name",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.Service = &apiregistrationv1.ServiceReference{} },
			want:   []string{"spec.service.namespace: Required value", "spec.service.name: Required value"},
		},
		{
			name:   "service port out of range",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.Service.Port = ptr.To[int32](65536) },
			want:   []string{"spec.service.port: Invalid value: 65536: port is not valid: must be between 1 and 65535, inclusive"},
		},
		{
			name:   "service port zero",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.Service.Port = ptr.To[int32](0) },
			want:   []string{"spec.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"},
		},
		{
			name:   "CA bundle and skipping TLS verification",
			obj:    remote,
			mutate: func(s *apiregistrationv1.APIService) { s.Spec.InsecureSkipTLSVerify = true },
			want:   []string{"spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"},
		},
		{
			name: "skipping TLS verification without a CA bundle",
			obj:  remote,
			mutate: func(s *apiregistrationv1.APIService) {
				s.Spec.InsecureSkipTLSVerify, s.Spec.CABundle = true, nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := tt.obj()
			tt.mutate(s)
			APIServiceStrategy().PrepareForCreate(ctx, s)
			if diff := cmp.Diff(tt.want, messages(APIServiceStrategy().Validate(ctx, s))); diff != "" {
				t.Errorf("create errors (-want +got):\n%s", diff)
			}
			old := tt.obj()
			APIServiceStrategy().PrepareForCreate(ctx, old)
			APIServiceStrategy().PrepareForUpdate(ctx, s, old)
			if diff := cmp.Diff(tt.want, messages(APIServiceStrategy().ValidateUpdate(ctx, s, old))); diff != "" {
				t.Errorf("update errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateStatus(t *testing.T) {
	tests := []struct {
		status apiregistrationv1.ConditionStatus
		want   []string
	}{
		{status: apiregistrationv1.ConditionTrue},
		{status: apiregistrationv1.ConditionFalse},
		{status: apiregistrationv1.ConditionUnknown},
		{status: "Maybe", want: []string{`status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"`}},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			old := remote()
			s := remote()
			s.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: tt.status}}
			if diff := cmp.Diff(tt.want, messages(APIServiceStrategy().ValidateUpdate(context.Background(), s, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepareForCreate(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t.Run("local is available", func(t *testing.T) {
		s := local()
		s.CreationTimestamp = created
		APIServiceStrategy().PrepareForCreate(context.Background(), s)
		want := []apiregistrationv1.APIServiceCondition{{
			Type:               apiregistrationv1.Available,
			Status:             apiregistrationv1.ConditionTrue,
			LastTransitionTime: created,
			Reason:             "Local",
			Message:            "Local APIServices are always available",
		}}
		if diff := cmp.Diff(want, s.Status.Conditions); diff != "" {
			t.Errorf("conditions (-want +got):\n%s", diff)
		}
	})
	t.Run("remote gets the default port and no condition", func(t *testing.T) {
		s := remote()
		APIServiceStrategy().PrepareForCreate(context.Background(), s)
		if got := ptr.Deref(s.Spec.Service.Port, 0); got != 443 {
			t.Errorf("port = %d, want 443", got)
		}
		if len(s.Status.Conditions) != 0 {
			t.Errorf("conditions = %v, want none until the service is checked", s.Status.Conditions)
		}
	})
	t.Run("update defaults the port", func(t *testing.T) {
		s := remote()
		APIServiceStrategy().PrepareForUpdate(context.Background(), s, remote())
		if got := ptr.Deref(s.Spec.Service.Port, 0); got != 443 {
			t.Errorf("port = %d, want 443", got)
		}
	})
}

func TestValidateName(t *testing.T) {
	v, ok := APIServiceStrategy().(rest.NameValidator)
	if !ok {
		t.Fatal("APIServiceStrategy does not validate names")
	}
	tests := []struct {
		name string
		want []string
	}{
		{name: "v1.apps"},
		{name: "v1."},
		{name: "a/b", want: []string{"may not contain '/'"}},
		{name: "..", want: []string{"may not be '..'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, v.ValidateName(tt.name, false)); diff != "" {
				t.Errorf("ValidateName(%q) (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}
