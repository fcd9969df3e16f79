#!/bin/bash
# The node-side flow around hotfix-agent, as AgentBaker's aks-node-controller-hotfix.sh (#9532)
# runs it, plus the provisioning report that lets a rollout see more than "installed"
# (docs/DOWNLOAD-HOTFIX.md, "The node flow"; docs/ROLLOUTS.md, "Automatic halt"):
#
#   1. read the features file (parsed, never sourced: KEY=VALUE lines, the last one counted
#      without a newline, comments, blanks and keys that are not shell identifiers skipped);
#   2. if ENABLE_PROVISIONING_HOTFIX is exactly `true`: hotfix-agent check-hotfix (fail-open);
#   3. if the pointer exists: hotfix-agent download-hotfix (its exit code never changes what
#      follows: binary selection does);
#   4. select the hotfix binary when it is executable, else the VHD binary;
#   5. run `<selected> provision [--provision-config=...] [--nbc-cmd=...]` (each flag only when
#      its file exists), as AgentBaker's launcher does;
#   6. with the hotfix binary selected: hotfix-agent report --outcome succeeded|failed (bounded
#      to 3 s, fail-open), so that gates and halts can count provisioning failures;
#   7. exit with provision's code.
#
# Sourced, it defines lp_run_node_flow and runs nothing; run, it runs the flow. Every path is
# overridable by the environment (the defaults are AKS's). Logs go to stdout, one line each,
# as the launcher's do.
#
#   HOTFIX_AGENT  the hotfix-agent binary          (/opt/azure/containers/hotfix-agent)
#   BIN_PATH      the VHD's aks-node-controller     (/opt/azure/containers/aks-node-controller)
#   HOTFIX_BIN    the staged hotfix binary          (${BIN_PATH}-hotfix)
#   HOTFIX_JSON   the pointer check-hotfix stages   (/opt/azure/containers/aks-node-controller-hotfix.json)
#   CONFIG_PATH   provision's --provision-config    (/opt/azure/containers/aks-node-controller-config.json)
#   NBC_CMD_PATH  provision's --nbc-cmd             (/opt/azure/containers/aks-node-controller-nbc-cmd.sh)
#   FEATURES_PATH the features file                 (/opt/azure/containers/enabled_features.sh)
#   CURRENT_VERSION  the VHD binary's version, passed as --current-version (unset: hotfix-agent's
#                    own, the version it shipped with on the image)
#   HOTFIX_AGENT_ARGS     extra flags for every hotfix-agent command, one per line: those all
#                         three take (--imds-url, --connect-to, --server-name, --log-file,
#                         --component); empty by default
#   HOTFIX_CHECK_ARGS     extra flags for check-hotfix alone, one per line (--events-dir ...)
#   HOTFIX_DOWNLOAD_ARGS  extra flags for download-hotfix alone, one per line (--os-release,
#                         --apt-sources-dir, --package-binary, --events-dir ...)

lp_log() { printf '%s aks-node-controller-hotfix: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }

# lp_read_features FILE: exports each KEY=VALUE line whose key is a shell identifier. Never
# evaluates the file: a line such as `exit 7` or `$(touch pwned)` is skipped or kept as text.
lp_read_features() {
  local line key value
  [[ -f $1 ]] || return 0
  lp_log "Reading feature flags from $1"
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
    [[ $line == *=* ]] || continue
    key=${line%%=*}
    value=${line#*=}
    [[ $key =~ ^[a-zA-Z_][a-zA-Z0-9_]*$ ]] || continue
    export "$key=$value"
  done <"$1"
}

lp_run_node_flow() {
  local agent=${HOTFIX_AGENT:-/opt/azure/containers/hotfix-agent}
  local bin=${BIN_PATH:-/opt/azure/containers/aks-node-controller}
  local hotfix_bin=${HOTFIX_BIN:-$bin-hotfix}
  local pointer=${HOTFIX_JSON:-/opt/azure/containers/aks-node-controller-hotfix.json}
  local config=${CONFIG_PATH:-/opt/azure/containers/aks-node-controller-config.json}
  local nbc=${NBC_CMD_PATH:-/opt/azure/containers/aks-node-controller-nbc-cmd.sh}
  local features=${FEATURES_PATH:-/opt/azure/containers/enabled_features.sh}
  local -a extra=() check_extra=() download_extra=() args=()
  local selected rc=0
  [[ -n ${HOTFIX_AGENT_ARGS:-} ]] && mapfile -t extra <<<"$HOTFIX_AGENT_ARGS"
  [[ -n ${HOTFIX_CHECK_ARGS:-} ]] && mapfile -t check_extra <<<"$HOTFIX_CHECK_ARGS"
  [[ -n ${HOTFIX_DOWNLOAD_ARGS:-} ]] && mapfile -t download_extra <<<"$HOTFIX_DOWNLOAD_ARGS"
  [[ -n ${CURRENT_VERSION:-} ]] && extra+=(--current-version "$CURRENT_VERSION")

  lp_read_features "$features"
  if [[ ${ENABLE_PROVISIONING_HOTFIX:-} == true ]]; then
    lp_log "ENABLE_PROVISIONING_HOTFIX=true; running check-hotfix to refresh hotfix pointer"
    if "$agent" check-hotfix --hotfix-pointer "$pointer" --node-config "$config" \
      --nbc-cmd "$nbc" "${extra[@]}" "${check_extra[@]}"; then
      lp_log "ANC check-hotfix completed; hotfix pointer refresh attempted"
    else
      lp_log "ANC check-hotfix failed; continuing (fail-open)"
    fi
  fi
  if [[ -f $pointer ]]; then
    lp_log "Found ANC hotfix config at $pointer; running download-hotfix"
    if "$agent" download-hotfix --hotfix-pointer "$pointer" --vhd-binary "$bin" \
      --hotfix-binary "$hotfix_bin" --node-config "$config" --nbc-cmd "$nbc" "${extra[@]}" \
      "${download_extra[@]}"; then
      lp_log "ANC download-hotfix completed; binary selection follows"
    else
      lp_log "ANC download-hotfix failed; binary selection follows"
    fi
  fi
  if [[ -x $hotfix_bin ]]; then
    selected=$hotfix_bin
    lp_log "Using hotfix binary: $selected"
  else
    selected=$bin
    lp_log "Using VHD-baked binary: $selected"
  fi
  [[ -f $config ]] && args+=("--provision-config=$config")
  [[ -f $nbc ]] && args+=("--nbc-cmd=$nbc")
  "$selected" provision "${args[@]}" || rc=$?
  lp_log "provision exited $rc"
  if [[ $selected == "$hotfix_bin" ]]; then
    local outcome=succeeded
    ((rc == 0)) || outcome=failed
    "$agent" report --outcome "$outcome" --detail "provision exited $rc" \
      --hotfix-pointer "$pointer" --hotfix-binary "$hotfix_bin" --node-config "$config" \
      --nbc-cmd "$nbc" "${extra[@]}" || lp_log "hotfix-agent report failed; continuing (fail-open)"
  fi
  return "$rc"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  lp_run_node_flow
  exit $?
fi
