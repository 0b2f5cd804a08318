// Package impersonation applies kube's impersonation headers
// (Impersonate-User, Impersonate-Group, Impersonate-Uid and
// Impersonate-Extra-<key>) as kube-apiserver's impersonation filter does:
// each thing asked for is authorized with the impersonate verb on users,
// serviceaccounts, groups, uids or userextras/<key>, and the request then
// goes on as the impersonated user, without the headers.
package impersonation
