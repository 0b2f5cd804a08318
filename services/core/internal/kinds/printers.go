package kinds

import (
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/resource"
)

// The column definitions below are kube's printers' (pkg/printers/
// internalversion), descriptions included, so that `kubectl get` and
// `kubectl get -o wide` print the same tables.

// column declares a column whose cells come from fn, a function of the
// kind's typed object.
func column[T runtime.Object](name, typ, description string, priority int32, fn func(T) any) resource.Column {
	return resource.Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: typ, Description: description, Priority: priority},
		Cell: resource.CellFunc(func(obj runtime.Object) (any, error) {
			t, ok := obj.(T)
			if !ok {
				var want T
				return nil, fmt.Errorf("print column %q: got %T, want %T", name, obj, want)
			}
			return fn(t), nil
		}),
	}
}

func ageColumn(c clock.PassiveClock) resource.Column {
	return resource.Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		Cell:                  resource.AgeCell{Clock: c},
	}
}

func namespaceColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("Status", "string", "The status of the namespace", 0, func(ns *corev1.Namespace) any { return string(ns.Status.Phase) }),
		ageColumn(c),
	}
}

func configMapColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("Data", "string", "Number of data keys", 0, func(cm *corev1.ConfigMap) any { return int64(len(cm.Data) + len(cm.BinaryData)) }),
		ageColumn(c),
	}
}

func secretColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("Type", "string", corev1.Secret{}.SwaggerDoc()["type"], 0, func(s *corev1.Secret) any { return string(s.Type) }),
		column("Data", "string", corev1.Secret{}.SwaggerDoc()["data"], 0, func(s *corev1.Secret) any { return int64(len(s.Data)) }),
		ageColumn(c),
	}
}

func serviceAccountColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("Secrets", "string", corev1.ServiceAccount{}.SwaggerDoc()["secrets"], 0, func(sa *corev1.ServiceAccount) any { return int64(len(sa.Secrets)) }),
		ageColumn(c),
	}
}

// eventColumns print an event in its core form; toCore gets it from the
// object served (identity for core/v1, a conversion for events.k8s.io).
// Kube's events table has no leading NAME: it is the last, wide column.
func eventColumns[T runtime.Object](c clock.PassiveClock, toCore func(T) *corev1.Event) []resource.Column {
	doc := corev1.Event{}.SwaggerDoc()
	ev := func(name, description string, priority int32, fn func(p eventRow) any) resource.Column {
		return column(name, "string", description, priority, func(obj T) any { return fn(newEventRow(toCore(obj), c)) })
	}
	name := ev("Name", metav1.ObjectMeta{}.SwaggerDoc()["name"], 1, func(p eventRow) any { return p.ev.Name })
	name.Format = "name"
	return []resource.Column{
		ev("Last Seen", doc["lastTimestamp"], 0, func(p eventRow) any { return p.lastSeen }),
		ev("Type", doc["type"], 0, func(p eventRow) any { return p.ev.Type }),
		ev("Reason", doc["reason"], 0, func(p eventRow) any { return p.ev.Reason }),
		ev("Object", doc["involvedObject"], 0, func(p eventRow) any { return p.object() }),
		ev("Subobject", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"], 1, func(p eventRow) any { return p.ev.InvolvedObject.FieldPath }),
		ev("Source", doc["source"], 1, func(p eventRow) any { return p.source() }),
		ev("Message", doc["message"], 0, func(p eventRow) any { return strings.TrimSpace(p.ev.Message) }),
		ev("First Seen", doc["firstTimestamp"], 1, func(p eventRow) any { return p.firstSeen }),
		ev("Count", doc["count"], 1, func(p eventRow) any { return p.count }),
		name,
	}
}

// eventRow is what kube's event printer derives from an event before
// printing its cells.
type eventRow struct {
	ev                  *corev1.Event
	firstSeen, lastSeen string
	count               int64
}

func newEventRow(ev *corev1.Event, c clock.PassiveClock) eventRow {
	r := eventRow{ev: ev, count: int64(ev.Count)}
	r.firstSeen = since(c, ev.FirstTimestamp.Time)
	if ev.FirstTimestamp.IsZero() {
		r.firstSeen = since(c, ev.EventTime.Time)
	}
	r.lastSeen = since(c, ev.LastTimestamp.Time)
	if ev.LastTimestamp.IsZero() {
		r.lastSeen = r.firstSeen
	}
	switch {
	case ev.Series != nil:
		r.lastSeen = since(c, ev.Series.LastObservedTime.Time)
		r.count = int64(ev.Series.Count)
	case r.count == 0:
		// Singleton events of the new API carry no count.
		r.count = 1
	}
	return r
}

func (r eventRow) object() string {
	kind := strings.ToLower(r.ev.InvolvedObject.Kind)
	if r.ev.InvolvedObject.Name == "" {
		return kind
	}
	return kind + "/" + r.ev.InvolvedObject.Name
}

func (r eventRow) source() string {
	component := firstNonEmpty(r.ev.Source.Component, r.ev.ReportingController)
	instance := firstNonEmpty(r.ev.Source.Host, r.ev.ReportingInstance)
	if instance == "" {
		return component
	}
	return component + ", " + instance
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// since is kube's age of a timestamp: "<unknown>" when unset.
func since(c clock.PassiveClock, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	if c == nil {
		c = clock.RealClock{}
	}
	return duration.HumanDuration(c.Since(t))
}

func leaseColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"], 0, func(l *coordinationv1.Lease) any {
			if l.Spec.HolderIdentity == nil {
				return ""
			}
			return *l.Spec.HolderIdentity
		}),
		ageColumn(c),
	}
}

// roleColumns print CREATED AT as an RFC 3339 date, not an age, as kube's
// role printers do.
func roleColumns[T interface {
	runtime.Object
	GetCreationTimestamp() metav1.Time
}]() []resource.Column {
	return []resource.Column{
		column("Created At", "date", metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"], 0, func(r T) any {
			return r.GetCreationTimestamp().UTC().Format(time.RFC3339)
		}),
	}
}

func roleBindingColumns[T runtime.Object](c clock.PassiveClock, parts func(T) (rbacv1.RoleRef, []rbacv1.Subject)) []resource.Column {
	subjects := func(pick func(users, groups, sas []string) []string) func(T) any {
		return func(b T) any {
			_, s := parts(b)
			return strings.Join(pick(subjectStrings(s)), ", ")
		}
	}
	return []resource.Column{
		column("Role", "string", rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"], 0, func(b T) any {
			ref, _ := parts(b)
			return ref.Kind + "/" + ref.Name
		}),
		ageColumn(c),
		column("Users", "string", "Users in the roleBinding", 1, subjects(func(u, _, _ []string) []string { return u })),
		column("Groups", "string", "Groups in the roleBinding", 1, subjects(func(_, g, _ []string) []string { return g })),
		column("ServiceAccounts", "string", "ServiceAccounts in the roleBinding", 1, subjects(func(_, _, sa []string) []string { return sa })),
	}
}

// subjectStrings sorts a binding's subjects as kube's rbac.SubjectsStrings:
// users and groups by name, service accounts as namespace/name.
func subjectStrings(subjects []rbacv1.Subject) (users, groups, sas []string) {
	users, groups, sas = []string{}, []string{}, []string{}
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return users, groups, sas
}

func webhookColumns[T runtime.Object](c clock.PassiveClock, count func(T) int) []resource.Column {
	return []resource.Column{
		column("Webhooks", "integer", "Webhooks indicates the number of webhooks in the configuration", 0, func(w T) any { return int64(count(w)) }),
		ageColumn(c),
	}
}

func validatingAdmissionPolicyColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("Validations", "integer", "Validations indicates the number of validation rules defined in this configuration", 0, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) any {
			return int64(len(p.Spec.Validations))
		}),
		column("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy", 0, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) any {
			if p.Spec.ParamKind == nil {
				return "<unset>"
			}
			return p.Spec.ParamKind.APIVersion + "/" + p.Spec.ParamKind.Kind
		}),
		ageColumn(c),
	}
}

func validatingAdmissionPolicyBindingColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to", 0, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) any {
			return b.Spec.PolicyName
		}),
		column("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param", 0, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) any {
			return paramRef(b.Spec.ParamRef)
		}),
		ageColumn(c),
	}
}

func mutatingAdmissionPolicyColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("Mutations", "integer", "Mutation indicates the number of mutations rules defined in this configuration", 0, func(p *admissionregistrationv1.MutatingAdmissionPolicy) any {
			return int64(len(p.Spec.Mutations))
		}),
		column("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy", 0, func(p *admissionregistrationv1.MutatingAdmissionPolicy) any {
			if p.Spec.ParamKind == nil {
				return "<unset>"
			}
			return p.Spec.ParamKind.APIVersion + "/" + p.Spec.ParamKind.Kind
		}),
		ageColumn(c),
	}
}

func mutatingAdmissionPolicyBindingColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to", 0, func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) any {
			return b.Spec.PolicyName
		}),
		column("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param", 0, func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) any {
			return paramRef(b.Spec.ParamRef)
		}),
		ageColumn(c),
	}
}

func paramRef(ref *admissionregistrationv1.ParamRef) string {
	switch {
	case ref == nil:
		return "<unset>"
	case ref.Name != "" && ref.Namespace != "":
		return ref.Namespace + "/" + ref.Name
	case ref.Name != "":
		// Whether the param is cluster-scoped is unknown here, so kube
		// prints any namespace.
		return "*/" + ref.Name
	case ref.Selector != nil:
		return ref.Selector.String()
	}
	return "<unset>"
}

func apiServiceColumns(c clock.PassiveClock) []resource.Column {
	return []resource.Column{
		column("Service", "string", "The reference to the service that hosts this API endpoint.", 0, func(s *apiregistrationv1.APIService) any {
			if s.Spec.Service == nil {
				return "Local"
			}
			return s.Spec.Service.Namespace + "/" + s.Spec.Service.Name
		}),
		column("Available", "string", "Whether this service is available.", 0, func(s *apiregistrationv1.APIService) any {
			for _, cond := range s.Status.Conditions {
				if cond.Type != apiregistrationv1.Available {
					continue
				}
				if cond.Status != apiregistrationv1.ConditionTrue && cond.Reason != "" {
					return fmt.Sprintf("%s (%s)", cond.Status, cond.Reason)
				}
				return string(cond.Status)
			}
			return string(apiregistrationv1.ConditionUnknown)
		}),
		ageColumn(c),
	}
}
