// The metric names the service exports, one place for the code that records them
// (ops/metrics.cc, ops/scraped_metrics.cc), the tests, and docs/SERVICE.md's table.
#pragma once

namespace hotfix::service {

inline constexpr char kMetricBuildInfo[] = "lp_build_info";
inline constexpr char kMetricAttestationRootsExpiry[] =
    "lp_attestation_roots_expiry_timestamp_seconds";
inline constexpr char kMetricAttestationRootsReloadSuccessful[] =
    "lp_attestation_roots_last_reload_successful";
inline constexpr char kMetricTlsCertificateExpiry[] = "lp_tls_certificate_expiry_timestamp_seconds";
inline constexpr char kMetricTlsPairExpiry[] = "lp_tls_pair_expiry_timestamp_seconds";
inline constexpr char kMetricTlsCertificates[] = "lp_tls_certificates";
inline constexpr char kMetricTlsRejectedCertificates[] = "lp_tls_rejected_certificates";
inline constexpr char kMetricTlsReloadSuccessful[] = "lp_tls_last_reload_successful";
inline constexpr char kMetricComponentFileInfo[] = "lp_component_file_info";
inline constexpr char kMetricRequests[] = "lp_requests_total";
inline constexpr char kMetricRequestsBySubscription[] = "lp_requests_by_subscription_total";
inline constexpr char kMetricLatency[] = "lp_request_duration_seconds";
inline constexpr char kMetricIdentityFailures[] = "lp_identity_failures_total";
inline constexpr char kMetricStoreGeneration[] = "lp_store_generation";
inline constexpr char kMetricStoreLastReloadSuccessful[] = "lp_store_last_reload_successful";
inline constexpr char kMetricStoreRejectedFiles[] = "lp_store_rejected_files";
inline constexpr char kMetricStoreComplete[] = "lp_store_complete";
inline constexpr char kMetricStoreReloads[] = "lp_store_reloads_total";
inline constexpr char kMetricTransportEvents[] = "lp_transport_events_total";
inline constexpr char kMetricOpenConnections[] = "lp_open_connections";
inline constexpr char kMetricMaxConnections[] = "lp_max_connections";
inline constexpr char kMetricMemoryLimit[] = "lp_memory_limit_bytes";
inline constexpr char kMetricRolloutApplied[] = "lp_rollout_applied_total";
inline constexpr char kMetricRolloutRatio[] = "lp_rollout_ratio";
inline constexpr char kMetricRolloutOutcomes[] = "lp_rollout_outcomes_total";
inline constexpr char kMetricRolloutAutoHalted[] = "lp_rollout_auto_halted";
inline constexpr char kMetricRolloutHalted[] = "lp_rollout_halted";
inline constexpr char kMetricRolloutResumedAt[] = "lp_rollout_resumed_timestamp_seconds";
inline constexpr char kMetricRolloutNodeSketch[] = "lp_rollout_node_sketch";
inline constexpr char kMetricRolloutHaltRecord[] = "lp_rollout_halt_record";
inline constexpr char kMetricRolloutEvidenceFrom[] = "lp_rollout_evidence_from";
inline constexpr char kMetricRolloutEvidenceTruncated[] = "lp_rollout_evidence_truncated";
inline constexpr char kMetricRolloutNodes[] = "lp_rollout_nodes";
inline constexpr char kMetricRolloutGateOpen[] = "lp_rollout_gate_open";
inline constexpr char kMetricRolloutStepStart[] = "lp_rollout_step_start";
inline constexpr char kMetricRolloutGateClosed[] = "lp_rollout_gate_closed";
inline constexpr char kMetricRolloutAutoHaltSignal[] = "lp_rollout_auto_halt_signal_ok";
inline constexpr char kMetricAutoHaltEvaluations[] = "lp_auto_halt_evaluations_total";
inline constexpr char kMetricAutoHaltSeconds[] = "lp_auto_halt_evaluation_seconds_total";
inline constexpr char kMetricIdentityVerifications[] = "lp_identity_verifications_total";
inline constexpr char kMetricIdentityCacheHits[] = "lp_identity_cache_hits_total";
inline constexpr char kMetricIdentityCacheEvictions[] = "lp_identity_cache_evictions_total";
inline constexpr char kMetricIdentityCacheEntries[] = "lp_identity_cache_entries";
inline constexpr char kMetricSignerCacheHits[] = "lp_signer_cache_hits_total";
inline constexpr char kMetricRefusalCacheHits[] = "lp_identity_refusal_cache_hits_total";
inline constexpr char kMetricSignerCacheEntries[] = "lp_signer_cache_entries";
inline constexpr char kMetricSignerRefusalCacheHits[] = "lp_signer_refusal_cache_hits_total";
inline constexpr char kMetricRateLimiterTrackedNodes[] = "lp_rate_limiter_tracked_nodes";
inline constexpr char kMetricLogLinesDropped[] = "lp_log_lines_dropped_total";
inline constexpr char kMetricConnectionMemory[] = "lp_connection_memory_bytes";
inline constexpr char kMetricAllowedSubscriptions[] = "lp_allowed_subscriptions";
inline constexpr char kMetricAllowedSubscriptionsReloadSuccessful[] =
    "lp_allowed_subscriptions_last_reload_successful";
inline constexpr char kMetricConnectionMemoryPool[] = "lp_connection_memory_pool_bytes";
inline constexpr char kMetricConnectionMemoryAddresses[] = "lp_connection_memory_addresses";

}  // namespace hotfix::service
