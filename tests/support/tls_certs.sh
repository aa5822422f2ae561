#!/bin/sh
# Test certificates for the TLS suites, made with the openssl CLI into DIR:
#   ca.crt ca.key           a CA the tests trust
#   server.crt server.key   for localhost and 127.0.0.1, signed by the CA
#   client.crt client.key   a client certificate (mutual TLS), by the CA
#   expired.crt expired.key for localhost and 127.0.0.1, expired yesterday
#   wronghost.crt .key      for other.example only
#   other-ca.crt            a CA that signed none of them
# Usage: tls_certs.sh DIR
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
q() { "$@" >/dev/null 2>&1; }
q openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt \
  -days 30 -subj "/CN=dlock test CA"
q openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key \
  -out other-ca.crt -days 30 -subj "/CN=dlock other CA"
# leaf NAME DAYS SAN: NAME.crt and NAME.key signed by the CA
leaf() {
  q openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" \
    -subj "/CN=$1"
  printf 'subjectAltName=%s\n' "$3" > "$1.ext"
  q openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out "$1.crt" -days "$2" -extfile "$1.ext"
  rm -f "$1.csr" "$1.ext"
}
leaf server 30 "DNS:localhost,IP:127.0.0.1"
leaf client 30 "DNS:dlock-test-client"
leaf expired -1 "DNS:localhost,IP:127.0.0.1"
leaf wronghost 30 "DNS:other.example"
chmod 600 ./*.key
