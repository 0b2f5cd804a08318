module kplane.dev/proto

go 1.26.0
