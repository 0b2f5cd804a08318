module kplane.dev/services/admission

go 1.26.0

replace kplane.dev/libs => ../../libs

replace kplane.dev/proto => ../../proto
