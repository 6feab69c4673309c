#include "client/cli/connection_flags.h"

#include <vector>

#include "absl/strings/str_split.h"
#include "common/cli_options.h"

namespace gemm::client {

void AddConnectionFlags(CLI::App* sub, ConnectionFlags* flags) {
  GemmClient::Options& o = flags->options;
  sub->add_option("-s,--server", flags->servers,
                  "server host:port, or several separated by commas "
                  "(round robin)")
      ->capture_default_str();
  sub->add_option("--connections", o.connections_per_target,
                  "channels (TCP connections) per server")
      ->capture_default_str();
  sub->add_option("--max-attempts", o.retry.max_attempts,
                  "attempts per job when the server says UNAVAILABLE "
                  "(1: no retries)")
      ->capture_default_str();
  AddMillisecondsOption(*sub, "--initial-backoff-ms", &o.retry.initial_backoff,
                        "wait before the first retry (doubles, +-20% jitter)");
  AddMillisecondsOption(*sub, "--max-backoff-ms", &o.retry.max_backoff,
                        "longest wait between retries");
  AddSecondsOption(*sub, "--timeout-s", &o.timeout,
                   "deadline of each call in seconds (0: none)");
  sub->add_option("--chunk-bytes", o.chunk_bytes,
                  "chunk size for jobs sent over the stream")
      ->capture_default_str();
  sub->add_option("--whole-job-bytes", o.whole_job_max_bytes,
                  "stream jobs up to this size (A+B+C) go as one message; "
                  "0 for servers before 0.2.0")
      ->capture_default_str();
  sub->add_option("--inline-result-bytes", o.inline_result_max_bytes,
                  "stream results up to this size come back inside the "
                  "job's end record; 0: always in chunks")
      ->capture_default_str();
  sub->add_option("--http2-stream-window-bytes", o.http2_stream_window_bytes,
                  "HTTP/2 flow-control window per stream: how far the "
                  "server may send results ahead of this client's reads "
                  "(0: gRPC's default)")
      ->capture_default_str();
  sub->add_option("--coalesce-small-writes", o.coalesce_small_writes,
                  "let small stream messages queued back to back share a "
                  "socket write (gRPC buffer hint); such a message leaves "
                  "only when the connection next writes for another "
                  "reason, so on a quiet connection it can wait")
      ->capture_default_str();
  sub->add_option("--split", o.split_rows,
                  "cut jobs of at least --split-min-bytes into this many "
                  "row blocks, sent at once over consecutive connections "
                  "(use with --connections; 1: never)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  sub->add_option("--split-min-bytes", o.split_min_bytes,
                  "smallest job (A+B+C bytes) that --split cuts")
      ->capture_default_str();
  sub->add_flag("--tls", o.tls,
                "TLS, checking the server's certificate against the "
                "system's CAs (implied by --tls-ca, --tls-cert)");
  sub->add_option("--tls-ca", o.tls_ca_file,
                  "TLS: the CAs (PEM file) the server's certificate must "
                  "be signed by");
  sub->add_option("--tls-cert", o.tls_cert_file,
                  "mTLS: this client's certificate chain (PEM file), with "
                  "--tls-key");
  sub->add_option("--tls-key", o.tls_key_file,
                  "mTLS: the client certificate's private key (PEM file)");
  sub->add_option("--token-file", o.token_file,
                  "a file holding the bearer token each call carries "
                  "(needs TLS)");
  sub->add_option("--http2-max-frame-bytes", o.http2_max_frame_bytes,
                  "largest HTTP/2 frame accepted, 16384..16777215 (0: "
                  "gRPC's default)")
      ->check(CLI::Range(0, 16777215))
      ->capture_default_str();
}

absl::StatusOr<std::unique_ptr<GemmClient>> Connect(
    const ConnectionFlags& flags) {
  GemmClient::Options options = flags.options;
  std::vector<std::string> targets =
      absl::StrSplit(flags.servers, ',', absl::SkipWhitespace());
  if (targets.size() == 1) options.target = targets[0];
  if (targets.size() > 1) options.targets = targets;
  return GemmClient::Create(options);
}

}  // namespace gemm::client
