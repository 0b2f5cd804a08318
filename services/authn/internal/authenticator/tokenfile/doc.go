// Package tokenfile authenticates static bearer tokens read from a CSV file
// in kube-apiserver's --token-auth-file format: token,user,uid and an optional
// fourth column of comma-separated groups ("group1,group2" when quoted).
package tokenfile
