# Sourced by scripts/demo.sh and the benchmarks: the cluster's test PKI, made with the openssl
# CLI. A CA and two leaves it signs (ECDSA P-256, SAN, serverAuth, valid one day):
#   make_cluster_pki DIR CA_CN LPS_NAME APISERVER_FQDN
#   -> DIR/ca.{pem,key}, DIR/lps.{pem,key} for LPS_NAME, DIR/apiserver.{pem,key} for the FQDN
make_cluster_pki() {
  local dir=$1 ca_cn=$2 lps_name=$3 fqdn=$4
  (
    cd "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
      -subj "/CN=$ca_cn" -keyout ca.key -out ca.pem 2>/dev/null
    leaf() {  # name, SAN
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
        -keyout "$1.key" -out "$1.csr" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
        -extfile <(printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth' "$2") \
        -out "$1.pem" 2>/dev/null
    }
    leaf lps "$lps_name"
    leaf apiserver "$fqdn"
  )
}
