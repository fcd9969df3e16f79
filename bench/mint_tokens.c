// mint_tokens: a pool of distinct IMDS attested documents for bench/node_boot_bench.sh, made
// the way the IMDS stand-in makes its one (tests/support/imds_standin.cc,
// SignAttestedContent): OpenSSL PKCS7_sign(signer, key, no extra certs, content,
// PKCS7_BINARY), attached content, the signer certificate embedded, DER, base64 on one line.
// The servers' strict-form check (src/service/node_identity.cc) accepts exactly that spelling,
// so the pool is made with the same call rather than another PKCS#7 library.
//
//   mint_tokens SIGNER_CERT_PEM SIGNER_KEY_PEM N [RUN_TAG]  > tokens.txt
//
// Writes N lines, each the `signature` value a node puts in `authorization`. Document i is the
// stand-in's JSON (same keys, order and spelling as nlohmann::json's dump) with vmId
// "<RUN_TAG as 8 hex digits>-b007-4000-8000-<i as 12 hex digits>" and nonce "boot-<i>", so
// every token is distinct (and so is its SHA-256: both servers' identity caches miss);
// createdOn now, expiresOn now + 6 h, as IMDS. Prints "minted N in S s" on stderr.
//
// Build: cc -O2 -o mint_tokens bench/mint_tokens.c -lcrypto
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(const char* what) {
  fprintf(stderr, "mint_tokens: %s\n", what);
  ERR_print_errors_fp(stderr);
  exit(1);
}

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    fprintf(stderr, "usage: mint_tokens SIGNER_CERT_PEM SIGNER_KEY_PEM N [RUN_TAG]\n");
    return 2;
  }
  long n = strtol(argv[3], NULL, 10);
  if (n <= 0 || n > 10000000) die("N must be 1..10000000");
  unsigned long tag = argc == 5 ? strtoul(argv[4], NULL, 0) : (unsigned long)time(NULL);

  FILE* f = fopen(argv[1], "r");
  if (f == NULL) die("cannot open the signer certificate");
  X509* cert = PEM_read_X509(f, NULL, NULL, NULL);
  fclose(f);
  if (cert == NULL) die("no PEM certificate in the signer file");
  f = fopen(argv[2], "r");
  if (f == NULL) die("cannot open the signer key");
  EVP_PKEY* key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
  fclose(f);
  if (key == NULL) die("no PEM key in the signer key file");

  // IMDS's "MM/DD/YY HH:MM:SS -0000" (UTC), as ImdsTimestamp.
  char created[32], expires[32];
  time_t now = time(NULL), later = now + 6 * 3600;
  struct tm tm;
  strftime(created, sizeof created, "%m/%d/%y %H:%M:%S -0000", gmtime_r(&now, &tm));
  strftime(expires, sizeof expires, "%m/%d/%y %H:%M:%S -0000", gmtime_r(&later, &tm));

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  static char out[1 << 16];
  char doc[1024];
  for (long i = 0; i < n; i++) {
    int len = snprintf(doc, sizeof doc,
                       "{\"licenseType\":\"\",\"nonce\":\"boot-%ld\","
                       "\"plan\":{\"name\":\"\",\"product\":\"\",\"publisher\":\"\"},"
                       "\"sku\":\"aks-ubuntu-2204gen2containerd\","
                       "\"subscriptionId\":\"8d10da13-8125-4ba9-a717-bf7490507b3d\","
                       "\"timeStamp\":{\"createdOn\":\"%s\",\"expiresOn\":\"%s\"},"
                       "\"vmId\":\"%08lx-b007-4000-8000-%012lx\"}",
                       i, created, expires, tag & 0xffffffffUL, (unsigned long)i);
    if (len <= 0 || len >= (int)sizeof doc) die("document too long");
    BIO* in = BIO_new_mem_buf(doc, len);
    PKCS7* p7 = in == NULL ? NULL : PKCS7_sign(cert, key, NULL, in, PKCS7_BINARY);
    if (p7 == NULL) die("PKCS7_sign");
    unsigned char* der = NULL;
    int der_len = i2d_PKCS7(p7, &der);
    if (der_len <= 0) die("i2d_PKCS7");
    if ((size_t)(4 * ((der_len + 2) / 3) + 2) > sizeof out) die("token too large");
    int b64 = EVP_EncodeBlock((unsigned char*)out, der, der_len);  // no line breaks
    out[b64] = '\n';
    if (fwrite(out, 1, (size_t)b64 + 1, stdout) != (size_t)b64 + 1) die("write");
    OPENSSL_free(der);
    PKCS7_free(p7);
    BIO_free(in);
  }
  if (fflush(stdout) != 0) die("write");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  fprintf(stderr, "minted %ld in %.2f s\n", n,
          (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  X509_free(cert);
  EVP_PKEY_free(key);
  return 0;
}
