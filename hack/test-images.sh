#!/usr/bin/env bash
# Checks the images `make images` built: each runs as user 65532, carries
# the version label, and its binary starts (--help, or --version for etcd
# and NATS). A service image's health check is its own binary, etcd's and
# NATS's kplane-probe: probing a replica that is not there must fail.
set -euo pipefail
repo=${IMAGE_REPO:?} version=${VERSION:?}
fail=0
for b in $(ls _output/images/bin); do
  img="$repo/$b:$version"
  user=$(docker inspect "$img" --format '{{.Config.User}}')
  label=$(docker inspect "$img" --format '{{index .Config.Labels "org.opencontainers.image.version"}}')
  size=$(docker inspect "$img" --format '{{.Size}}')
  if [[ $user != 65532:65532 || $label != "$version" ]]; then
    echo "FAIL $img: user $user, version label $label"; fail=1; continue
  fi
  case $b in
    etcd|nats-server) args=(--version) ;;
    *) args=(--help) ;;
  esac
  if ! docker run --rm --network none "$img" "${args[@]}" >/dev/null 2>&1; then
    echo "FAIL $img: ${args[*]} did not run"; fail=1; continue
  fi
  if [[ $b == kplane-* && $b != kplane-up ]] &&
     docker run --rm --network none "$img" healthcheck --listen-address=127.0.0.1:6443 --tls-cert-file=/etc/ssl/certs/ca-certificates.crt >/dev/null 2>&1; then
    echo "FAIL $img: healthcheck passed with no replica running"; fail=1; continue
  fi
  # etcd's and NATS's health check is kplane-probe: it must be there and
  # fail with nothing to probe.
  if [[ $b == etcd || $b == nats-server ]]; then
    out=$(docker run --rm --network none --entrypoint /usr/local/bin/kplane-probe "$img" nats://127.0.0.1:4222 2>&1 || true)
    if [[ $out != *"kplane-probe: dial tcp"* ]]; then
      echo "FAIL $img: no working kplane-probe: $out"; fail=1; continue
    fi
  fi
  echo "ok   $img $((size / 1000000)) MB"
done
exit $fail
