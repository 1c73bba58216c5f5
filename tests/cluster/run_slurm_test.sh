#!/usr/bin/env bash
# End-to-end test of profiles/slurm on a real single-node SLURM cluster on this host.
#
# Run from the repository root with the project venv active:
#     bash tests/cluster/run_slurm_test.sh
# Needs root (apt-get, daemons). Exits non-zero on any failure.
#
# Stages: install (Debian slurm-wlm + munge, the executor plugin), start
# (munged, slurmctld, slurmd; no slurmdbd), a local reference run, a SLURM run,
# checks (a) every optimizer run executed inside a SLURM job that ended
# COMPLETED and (b) aggregate tables equal the local ones (timing columns
# aside; the SLURM run's --jobs split lockstep jobs the local --cores 2 keeps
# whole, config key job_split), (c) a fault run (scancel one running optimizer job, rerun with
# --rerun-incomplete, tables still equal), (d) daemons stopped by PID.
#
# Job states come from SLURM's job-completion log (JobCompType=jobcomp/filetxt);
# the executor polls with `squeue` (--slurm-status-command squeue), so no
# slurmdbd/MariaDB is needed. See docs/cluster.md.
#
# Environment knobs (all optional):
#   SLURM_TEST_SRC        directory holding the workflow to test (default: repo root)
#   SLURM_TEST_CONFIG     config file, relative to SLURM_TEST_SRC (default: config/test.yaml)
#   SLURM_TEST_OPT_RULE   optimizer rule name (default: detected in workflow/rules/*.smk)
#   SLURM_TEST_TABLES     aggregate-table directory in the run dir (default: results/tables)
#   SLURM_TEST_TIMEOUT    timeout per snakemake run in seconds (default: 1800)
#   SLURM_TEST_KEEP=1     keep the temporary work directory
set -euo pipefail

REPO="$(pwd)"
SRC="${SLURM_TEST_SRC:-$REPO}"
CONFIG="${SLURM_TEST_CONFIG:-config/test.yaml}"
TABLES="${SLURM_TEST_TABLES:-results/tables}"
RUN_TIMEOUT="${SLURM_TEST_TIMEOUT:-1800}"
PLUGIN_PIN="snakemake-executor-plugin-slurm==2.8.0"
HELPER="$REPO/tests/cluster/slurm_checks.py"

if [[ ! -f "$REPO/profiles/slurm/config.yaml" || ! -f "$HELPER" ]]; then
    echo "run_slurm_test.sh: run me from the dpnewton repository root" >&2
    exit 2
fi
if [[ $EUID -ne 0 ]]; then
    echo "run_slurm_test.sh: needs root (installs packages, starts SLURM daemons)" >&2
    exit 2
fi

WORK="$(mktemp -d /tmp/dpnewton-slurm-test.XXXXXX)"
SD="$WORK/slurm"                      # SLURM state, spool, logs, job-completion log
# The config must sit at the default path: the plugin's job-step executor
# drops SLURM_* variables (SLURM_CONF included) before its inner `srun`.
SLURM_CONF_PATH=/etc/slurm/slurm.conf
unset SLURM_CONF
mkdir -p "$SD/state" "$SD/spool"

# ---------------------------------------------------------------- bookkeeping
declare -a STAGE_NAMES=() STAGE_SECS=() RESULTS=()
declare -a DAEMON_PIDS=() DAEMON_NAMES=()
STAGE_T0=0
CURRENT_STAGE=""
FAILED=0
CREATED_POLICY_RC=0
WROTE_SLURM_CONF=0

now() { date +%s.%N; }
stage() {   # stage NAME: close the running stage, open a new one
    stage_end
    CURRENT_STAGE="$1"
    STAGE_T0="$(now)"
    echo
    echo "=== [$(date +%T)] stage: $1"
}
stage_end() {
    if [[ -n "$CURRENT_STAGE" ]]; then
        local dt
        dt="$(awk -v a="$STAGE_T0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}')"
        STAGE_NAMES+=("$CURRENT_STAGE")
        STAGE_SECS+=("$dt")
        echo "=== stage $CURRENT_STAGE took ${dt}s"
        CURRENT_STAGE=""
    fi
}
pass() { RESULTS+=("PASS  $1"); echo "PASS: $1"; }
fail() { RESULTS+=("FAIL  $1"); echo "FAIL: $1" >&2; FAILED=1; }
die() { fail "$1"; exit 1; }

stop_daemons() {
    # Stop only the daemons this script started, newest first, by PID.
    local i pid name
    for ((i = ${#DAEMON_PIDS[@]} - 1; i >= 0; i--)); do
        pid="${DAEMON_PIDS[$i]}"
        name="${DAEMON_NAMES[$i]}"
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.2
            done
            if kill -0 "$pid" 2>/dev/null; then
                echo "  $name ($pid) ignored SIGTERM, sending SIGKILL"
                kill -KILL "$pid" 2>/dev/null || true
                sleep 0.5
            fi
        fi
        wait "$pid" 2>/dev/null || true
    done
}

on_exit() {
    local rc=$?
    set +e
    stage_end
    stage "stop daemons"
    # cancel whatever might still be queued from our runs
    if [[ ${#DAEMON_PIDS[@]} -gt 0 ]] && command -v scancel >/dev/null; then
        timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null
    fi
    stop_daemons
    local gone=1 i
    for i in "${!DAEMON_PIDS[@]}"; do
        if kill -0 "${DAEMON_PIDS[$i]}" 2>/dev/null; then
            echo "  still alive: ${DAEMON_NAMES[$i]} (${DAEMON_PIDS[$i]})" >&2
            gone=0
        fi
    done
    if [[ ${#DAEMON_PIDS[@]} -gt 0 ]]; then
        if [[ $gone -eq 1 ]]; then
            pass "(d) daemons stopped: ${DAEMON_NAMES[*]} (PIDs ${DAEMON_PIDS[*]})"
        else
            fail "(d) some daemons are still running"
        fi
    fi
    if [[ $WROTE_SLURM_CONF -eq 1 ]]; then
        # put back whatever was there before (normally nothing)
        rm -f "$SLURM_CONF_PATH"
        [[ -e "$SD/slurm.conf.orig" ]] && mv "$SD/slurm.conf.orig" "$SLURM_CONF_PATH"
    fi
    if [[ $CREATED_POLICY_RC -eq 1 ]]; then
        rm -f /usr/sbin/policy-rc.d
    fi
    stage_end
    if [[ $rc -ne 0 || $FAILED -ne 0 ]] && [[ -d "$SD" ]]; then
        echo
        echo "--- tail of slurmctld.log"; tail -n 20 "$SD/slurmctld.log" 2>/dev/null
        echo "--- tail of slurmd.log"; tail -n 20 "$SD/slurmd.log" 2>/dev/null
    fi
    echo
    echo "==================== SLURM profile test summary"
    for i in "${!STAGE_NAMES[@]}"; do
        printf '  %-28s %7ss\n' "${STAGE_NAMES[$i]}" "${STAGE_SECS[$i]}"
    done
    printf '  %-28s %7ss\n' "total" "$SECONDS"
    for r in "${RESULTS[@]}"; do echo "  $r"; done
    if [[ "${SLURM_TEST_KEEP:-0}" == 1 || $rc -ne 0 || $FAILED -ne 0 ]]; then
        echo "  work directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
    if [[ $rc -eq 0 && $FAILED -eq 0 ]]; then
        echo "SLURM PROFILE TEST: PASS"
        exit 0
    fi
    echo "SLURM PROFILE TEST: FAIL"
    exit 1
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- install
stage "install"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v munged >/dev/null; then
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        # deny service starts during install: there is no systemd, and we
        # start the daemons ourselves with our own configuration
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        CREATED_POLICY_RC=1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurm-wlm munge >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log"; die "apt-get install slurm-wlm munge"; }
fi
if ! python -c 'import snakemake_executor_plugin_slurm' 2>/dev/null; then
    python -m pip install -q "$PLUGIN_PIN" || die "pip install $PLUGIN_PIN"
fi
echo "slurm: $(slurmctld -V)  plugin: $(python -m pip show snakemake-executor-plugin-slurm 2>/dev/null | awk '/^Version/{print $2}')"

# ---------------------------------------------------------------- configure + start
stage "start cluster"
for d in munged slurmctld slurmd slurmdbd; do
    if pgrep -x "$d" >/dev/null; then
        die "a $d is already running on this host; a second test cluster would collide with it"
    fi
done

HOST="$(hostname -s)"
# "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
NODE_HW="$(slurmd -C | head -n 1 | sed -e 's/^NodeName=[^ ]* //')"
NCPU="$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$NODE_HW")"
mkdir -p "$(dirname "$SLURM_CONF_PATH")"
if [[ -e "$SLURM_CONF_PATH" ]]; then
    cp -a "$SLURM_CONF_PATH" "$SD/slurm.conf.orig"
    echo "  saved the existing $SLURM_CONF_PATH; it is restored on exit"
fi
WROTE_SLURM_CONF=1
cat >"$SLURM_CONF_PATH" <<EOF
# single-node test cluster written by tests/cluster/run_slurm_test.sh
ClusterName=dpnewtontest
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$SD/state
SlurmdSpoolDir=$SD/spool
SlurmctldPidFile=$SD/slurmctld.pid
SlurmdPidFile=$SD/slurmd.pid
SlurmctldLogFile=$SD/slurmctld.log
SlurmdLogFile=$SD/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=600
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$SD/jobcomp.txt
NodeName=$HOST NodeAddr=127.0.0.1 $NODE_HW State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF

start_daemon() {   # start_daemon NAME CMD...: run in foreground mode in the background, keep PID
    local name="$1"
    shift
    "$@" >"$SD/$name.out" 2>&1 &
    DAEMON_PIDS+=("$!")
    DAEMON_NAMES+=("$name")
    echo "  started $name (pid $!)"
}

# munge: key from the package's postinst, or make one
mkdir -p /run/munge /var/lib/munge /var/log/munge /etc/munge
if [[ ! -s /etc/munge/munge.key ]]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /run/munge /var/lib/munge /var/log/munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
start_daemon munged setpriv --reuid=munge --regid=munge --clear-groups munged --foreground
for _ in $(seq 1 50); do
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
    sleep 0.1
done
munge -n | unmunge >/dev/null || die "munged does not answer"

start_daemon slurmctld slurmctld -D -f "$SLURM_CONF_PATH"
start_daemon slurmd slurmd -D -f "$SLURM_CONF_PATH"
state=""
for _ in $(seq 1 120); do
    state="$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)"
    [[ "$state" == idle ]] && break
    sleep 0.5
done
[[ "$state" == idle ]] || die "node not idle after 60 s (state: '${state:-none}')"
sinfo
pass "single-node SLURM up: $HOST ($NODE_HW)"

# ---------------------------------------------------------------- workflow copies
OPT_RULE="${SLURM_TEST_OPT_RULE:-}"
if [[ -z "$OPT_RULE" ]]; then
    for cand in run_job run_optimizer optimizer_runs run_optimizers; do
        if grep -qsE "^rule ${cand}:" "$SRC"/workflow/rules/*.smk "$SRC"/workflow/Snakefile; then
            OPT_RULE="$cand"
            break
        fi
    done
fi
[[ -n "$OPT_RULE" ]] || die "could not find the optimizer rule in $SRC/workflow (set SLURM_TEST_OPT_RULE)"
[[ -f "$SRC/$CONFIG" ]] || die "test config $SRC/$CONFIG not found"
echo "optimizer rule: $OPT_RULE   config: $CONFIG"

# One snapshot of the workflow, so that the local, SLURM and fault runs use the
# same rules and configs (the package itself is the installed one).
SNAP="$WORK/snapshot"
mkdir -p "$SNAP"
for item in Snakefile workflow config profiles envs; do
    if [[ -e "$SRC/$item" ]]; then cp -a "$SRC/$item" "$SNAP/"; fi
done
rm -rf "$SNAP/profiles/slurm"          # the SLURM profile under test is always the repo's
mkdir -p "$SNAP/profiles"
cp -a "$REPO/profiles/slurm" "$SNAP/profiles/slurm"

make_copy() {   # make_copy DIR: a throwaway copy of the workflow snapshot, outside the repo
    local dst="$1" item
    mkdir -p "$dst"
    for item in Snakefile workflow config profiles envs; do
        if [[ -e "$SNAP/$item" ]]; then cp -a "$SNAP/$item" "$dst/"; fi
    done
}

# config/*.yaml may name data relative to the repo (data_dir: ../shared/datasets):
# the copies live in $WORK/<run>, so make $WORK/shared the repo's sibling shared/
if [[ -d "$SRC/../shared" && ! -e "$WORK/shared" ]]; then
    ln -s "$(cd "$SRC/../shared" && pwd)" "$WORK/shared"
fi

# test-only overrides on top of the profile:
#  * status via squeue: no slurmdbd here (sacct would wait forever)
#  * first status check after 2 s instead of 30 s
#  * keep logs of successful jobs: check (a) maps SLURM job ids to optimizer runs
#  * no account lookup (no accounting database)
#  * --cores: a group job must fit on this node
SLURM_ARGS=(--profile profiles/slurm --configfile "$CONFIG"
    --slurm-status-command squeue
    --slurm-init-seconds-before-status-checks 2
    --slurm-keep-successful-logs
    --slurm-no-account
    --cores "$NCPU")

run_sm() {   # run_sm DIR LOG ARGS...: snakemake in DIR with a hard timeout
    local dir="$1" log="$2"
    shift 2
    (cd "$dir" && timeout -s INT -k 60 "$RUN_TIMEOUT" snakemake "$@") >"$log" 2>&1
}

# ---------------------------------------------------------------- local reference + SLURM run
# The local reference run goes in the background while the SLURM run waits on
# SLURM latencies; the results do not depend on timing (seeded per job).
stage "local + slurm runs"
make_copy "$WORK/local"
make_copy "$WORK/slurm-run"
T_LOCAL0=$SECONDS
run_sm "$WORK/local" "$WORK/local.log" --cores 2 --configfile "$CONFIG" &
LOCAL_PID=$!
T_SLURM0=$SECONDS
slurm_rc=0
run_sm "$WORK/slurm-run" "$WORK/slurm-run.log" "${SLURM_ARGS[@]}" || slurm_rc=$?
echo "slurm run: ${SLURM_ARGS[*]} -> rc $slurm_rc after $((SECONDS - T_SLURM0))s"
local_rc=0
wait "$LOCAL_PID" || local_rc=$?
echo "local run: --cores 2 -> rc $local_rc after $((SECONDS - T_LOCAL0))s (finished)"
if [[ $local_rc -eq 0 ]]; then
    pass "local --cores 2 run"
else
    tail -n 40 "$WORK/local.log"
    die "local --cores 2 run failed (log: $WORK/local.log)"
fi
if [[ $slurm_rc -eq 0 ]]; then
    pass "SLURM run with --profile profiles/slurm"
else
    tail -n 60 "$WORK/slurm-run.log"
    die "SLURM run failed (log: $WORK/slurm-run.log)"
fi
echo "SLURM jobs submitted: $(grep -cE 'has been submitted with SLURM jobid' "$WORK/slurm-run.log" || true)"

stage "checks"
if python "$HELPER" jobs --run-dir "$WORK/slurm-run" --main-log "$WORK/slurm-run.log" \
    --jobcomp "$SD/jobcomp.txt" --rule "$OPT_RULE"; then
    pass "(a) every $OPT_RULE job ran in a SLURM job that ended COMPLETED"
else
    fail "(a) optimizer jobs vs SLURM job-completion log"
fi
if python "$HELPER" tables "$WORK/local/$TABLES" "$WORK/slurm-run/$TABLES"; then
    pass "(b) SLURM tables == local tables (timing columns aside)"
else
    fail "(b) SLURM tables differ from local tables"
fi

# ---------------------------------------------------------------- fault run
# Start from a copy of the finished SLURM run, delete the outputs of a few
# optimizer jobs and the aggregate tables, rerun: while their (group) job runs, scancel it. Snakemake
# must report the failure; a rerun with --rerun-incomplete must complete and
# give the same tables. (Redoing only a few jobs keeps this stage short.)
stage "fault run"
cp -a "$WORK/slurm-run" "$WORK/fault-run"
rm -rf "$WORK/fault-run/.snakemake/slurm_logs"
# the plan of the SLURM run: its jobs are sized for the profile's `jobs` (config key job_split)
SLURM_SLOTS="$(python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["jobs"])' \
    "$REPO/profiles/slurm/config.yaml")"
(cd "$WORK/fault-run" && snakemake --summary --configfile "$CONFIG" --cores "$SLURM_SLOTS" 2>/dev/null) \
    >"$WORK/summary.tsv" || true
mapfile -t VICTIM_FILES < <(python "$HELPER" pick --summary "$WORK/summary.tsv" --rule "$OPT_RULE" -n 4)
[[ ${#VICTIM_FILES[@]} -gt 0 ]] || die "fault run: no $OPT_RULE outputs found in snakemake --summary"
echo "deleting the outputs of 4 $OPT_RULE jobs: ${VICTIM_FILES[*]}"
(cd "$WORK/fault-run" && rm -f -- "${VICTIM_FILES[@]}")
# Snakemake does not rebuild missing intermediate files while the final outputs
# are present and newer, so also drop the aggregate tables (their consumer).
rm -rf "${WORK:?}/fault-run/$TABLES"
OPT_GROUP="$(python "$HELPER" group-of --rule "$OPT_RULE" --profile "$REPO/profiles/slurm/config.yaml")"
run_sm "$WORK/fault-run" "$WORK/fault-1.log" "${SLURM_ARGS[@]}" &
SM_PID=$!
victim=""
for _ in $(seq 1 $((RUN_TIMEOUT * 10))); do
    # a running SLURM job whose comment names the optimizer rule (plain job:
    # "rule_<rule>_wildcards_...") or its group ("rule_<group>_<rule>")
    victim="$(squeue -h -t RUNNING -o '%i|%k' 2>/dev/null \
        | awk -F'|' -v r="$OPT_RULE" -v g="$OPT_GROUP" \
            '(index($2, r) || (g != "" && index($2, g))) {print $1; exit}')"
    [[ -n "$victim" ]] && break
    kill -0 "$SM_PID" 2>/dev/null || break
    sleep 0.1
done
if [[ -z "$victim" ]]; then
    wait "$SM_PID" || true
    die "fault run: never saw a running $OPT_RULE job to cancel"
fi
sleep 1
echo "cancelling SLURM job $victim: $(squeue -h -j "$victim" -o '%i %T %M %k' 2>/dev/null || true)"
scancel "$victim"
rc1=0
wait "$SM_PID" || rc1=$?
echo "first fault-run attempt exited with $rc1 (non-zero expected)"
victim_state="$(python "$HELPER" state --jobcomp "$SD/jobcomp.txt" --jobid "$victim")"
echo "state of job $victim: $victim_state"
if [[ "$victim_state" == CANCELLED* && $rc1 -ne 0 ]]; then
    pass "(c) scancel of running job $victim was noticed (state $victim_state, snakemake rc $rc1)"
else
    fail "(c) cancelled job $victim: state '$victim_state', snakemake rc $rc1"
fi
if run_sm "$WORK/fault-run" "$WORK/fault-2.log" "${SLURM_ARGS[@]}" --rerun-incomplete; then
    missing_after=0
    for f in "${VICTIM_FILES[@]}"; do
        [[ -e "$WORK/fault-run/$f" ]] || { echo "missing after rerun: $f"; missing_after=1; }
    done
    if [[ $missing_after -eq 0 ]]; then
        pass "(c) rerun after scancel completed and rebuilt the deleted outputs"
    else
        fail "(c) rerun after scancel did not rebuild all deleted outputs"
    fi
else
    tail -n 60 "$WORK/fault-2.log"
    fail "(c) rerun after scancel failed (log: $WORK/fault-2.log)"
fi
if python "$HELPER" tables "$WORK/local/$TABLES" "$WORK/fault-run/$TABLES"; then
    pass "(c) tables after fault + rerun == local tables"
else
    fail "(c) tables after fault + rerun differ from local tables"
fi
stage_end
