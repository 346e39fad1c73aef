_rdmadiag() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="rdmadiag"
                ;;
            rdmadiag,bw)
                cmd="rdmadiag__subcmd__bw"
                ;;
            rdmadiag,check)
                cmd="rdmadiag__subcmd__check"
                ;;
            rdmadiag,devices)
                cmd="rdmadiag__subcmd__devices"
                ;;
            rdmadiag,fabric)
                cmd="rdmadiag__subcmd__fabric"
                ;;
            rdmadiag,help)
                cmd="rdmadiag__subcmd__help"
                ;;
            rdmadiag,lat)
                cmd="rdmadiag__subcmd__lat"
                ;;
            rdmadiag,pingpong)
                cmd="rdmadiag__subcmd__pingpong"
                ;;
            rdmadiag,ports)
                cmd="rdmadiag__subcmd__ports"
                ;;
            rdmadiag,read)
                cmd="rdmadiag__subcmd__read"
                ;;
            rdmadiag,write)
                cmd="rdmadiag__subcmd__write"
                ;;
            rdmadiag__subcmd__help,bw)
                cmd="rdmadiag__subcmd__help__subcmd__bw"
                ;;
            rdmadiag__subcmd__help,check)
                cmd="rdmadiag__subcmd__help__subcmd__check"
                ;;
            rdmadiag__subcmd__help,devices)
                cmd="rdmadiag__subcmd__help__subcmd__devices"
                ;;
            rdmadiag__subcmd__help,fabric)
                cmd="rdmadiag__subcmd__help__subcmd__fabric"
                ;;
            rdmadiag__subcmd__help,help)
                cmd="rdmadiag__subcmd__help__subcmd__help"
                ;;
            rdmadiag__subcmd__help,lat)
                cmd="rdmadiag__subcmd__help__subcmd__lat"
                ;;
            rdmadiag__subcmd__help,pingpong)
                cmd="rdmadiag__subcmd__help__subcmd__pingpong"
                ;;
            rdmadiag__subcmd__help,ports)
                cmd="rdmadiag__subcmd__help__subcmd__ports"
                ;;
            rdmadiag__subcmd__help,read)
                cmd="rdmadiag__subcmd__help__subcmd__read"
                ;;
            rdmadiag__subcmd__help,write)
                cmd="rdmadiag__subcmd__help__subcmd__write"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        rdmadiag)
            opts="-h -V --help --version devices ports pingpong bw lat write read check fabric help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__bw)
            opts="-A -c -s -a -n -D -I -F -p -i -x -v -q -t -Q -l -o -b -w -y -d -h -V --op --atomic_type --connection --size --all --sizes --iters --duration --vs-tcp --inline --CPU-freq --report_gbits --counters --port --bind --persist --loopback --key-file --cm --ib-port --gid-index --mtu --tclass --sl --timeout --wait --max-size --max-qps --verbose --compat --json --qps --tx-depth --cq-mod --post-list --outstanding --bidirectional --units --expect-bw --limit_bw --expect-msgrate --limit_msgrate --expect-size --device --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --op)
                    COMPREPLY=($(compgen -W "send write read atomic-fadd atomic-cswap" -- "${cur}"))
                    return 0
                    ;;
                --atomic_type)
                    COMPREPLY=($(compgen -W "FETCH_AND_ADD CMP_AND_SWAP" -- "${cur}"))
                    return 0
                    ;;
                -A)
                    COMPREPLY=($(compgen -W "FETCH_AND_ADD CMP_AND_SWAP" -- "${cur}"))
                    return 0
                    ;;
                --connection)
                    COMPREPLY=($(compgen -W "RC UC UD" -- "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -W "RC UC UD" -- "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sizes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --duration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -D)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -I)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ib-port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gid-index)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -x)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mtu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tclass)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sl)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compat)
                    COMPREPLY=($(compgen -W "perftest" -- "${cur}"))
                    return 0
                    ;;
                --qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -q)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tx-depth)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -t)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cq-mod)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -Q)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --post-list)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -l)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --outstanding)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --units)
                    COMPREPLY=($(compgen -W "gbit mib" -- "${cur}"))
                    return 0
                    ;;
                --expect-bw)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --limit_bw)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -w)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-msgrate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --limit_msgrate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -y)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                -d)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__check)
            opts="-o -d -h -V --expect-state --expect-rate --expect-width --expect-mtu --expect-link-layer --expect-gid --pcie --expect-pcie --expect-numa --cpus --interval --max-error-delta --loopback-bw --loopback-lat --peer --key-file --peer-bw --peer-lat --tclass --sl --timeout --format --output --slurm-drain --json --device --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --expect-state)
                    COMPREPLY=($(compgen -W "down init armed active" -- "${cur}"))
                    return 0
                    ;;
                --expect-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-width)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-mtu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-link-layer)
                    COMPREPLY=($(compgen -W "infiniband ethernet" -- "${cur}"))
                    return 0
                    ;;
                --expect-pcie)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-numa)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cpus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-error-delta)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --loopback-bw)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --loopback-lat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --peer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --peer-bw)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --peer-lat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tclass)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sl)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "text json nhc prometheus" -- "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                -d)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__devices)
            opts="-d -h -V --json --device --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --device)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                -d)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__fabric)
            opts="-s -n -i -x -v -d -h -V --hosts --coordinator --pattern --tests --size --iters --ib-port --gid-index --tclass --sl --seed --min-bw-ratio --max-lat-ratio --expect-bw --expect-lat --no-counter-check --max-error-delta --require-same --allow-missing --no-retest --retest-rounds --timeout --csv --prometheus --verbose --key-file --insecure --bind --json --device --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --hosts)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --coordinator)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pattern)
                    COMPREPLY=($(compgen -W "all-pairs ring quick" -- "${cur}"))
                    return 0
                    ;;
                --tests)
                    COMPREPLY=($(compgen -W "bw lat" -- "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ib-port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gid-index)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -x)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tclass)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sl)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-bw-ratio)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-lat-ratio)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-bw)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-lat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-error-delta)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --require-same)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retest-rounds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --csv)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prometheus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                -d)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help)
            opts="devices ports pingpong bw lat write read check fabric help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__bw)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__check)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__devices)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__fabric)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__lat)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__pingpong)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__ports)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__read)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__help__subcmd__write)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__lat)
            opts="-A -c -s -a -n -D -I -F -p -i -x -v -d -h -V --op --atomic_type --connection --size --all --sizes --iters --duration --vs-tcp --inline --CPU-freq --report_gbits --counters --port --bind --persist --loopback --key-file --cm --ib-port --gid-index --mtu --tclass --sl --timeout --wait --max-size --max-qps --verbose --compat --json --histogram --timing --expect-lat --expect-percentile --expect-size --device --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --op)
                    COMPREPLY=($(compgen -W "send write read atomic-fadd atomic-cswap" -- "${cur}"))
                    return 0
                    ;;
                --atomic_type)
                    COMPREPLY=($(compgen -W "FETCH_AND_ADD CMP_AND_SWAP" -- "${cur}"))
                    return 0
                    ;;
                -A)
                    COMPREPLY=($(compgen -W "FETCH_AND_ADD CMP_AND_SWAP" -- "${cur}"))
                    return 0
                    ;;
                --connection)
                    COMPREPLY=($(compgen -W "RC UC UD" -- "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -W "RC UC UD" -- "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sizes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --duration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -D)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -I)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ib-port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gid-index)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -x)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mtu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tclass)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sl)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compat)
                    COMPREPLY=($(compgen -W "perftest" -- "${cur}"))
                    return 0
                    ;;
                --timing)
                    COMPREPLY=($(compgen -W "perftest lean" -- "${cur}"))
                    return 0
                    ;;
                --expect-lat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-percentile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                -d)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__pingpong)
            opts="-c -s -n -e -p -i -x -v -d -h -V --connection --size --iters --rx-depth --events --counters --port --bind --persist --loopback --key-file --cm --ib-port --gid-index --mtu --tclass --sl --timeout --wait --max-size --max-qps --verbose --compat --json --device --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --connection)
                    COMPREPLY=($(compgen -W "RC UC UD" -- "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -W "RC UC UD" -- "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rx-depth)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ib-port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gid-index)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -x)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mtu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tclass)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sl)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compat)
                    COMPREPLY=($(compgen -W "ibv" -- "${cur}"))
                    return 0
                    ;;
                --device)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                -d)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__ports)
            opts="-i -v -d -h -V --ib-port --verbose --counters --interval --json --device --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --ib-port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                -d)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__read)
            opts="-s -n -p -i -x -v -d -h -V --size --iters --counters --port --bind --persist --loopback --key-file --cm --ib-port --gid-index --mtu --tclass --sl --timeout --wait --max-size --max-qps --verbose --json --device --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ib-port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gid-index)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -x)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mtu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tclass)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sl)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                -d)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rdmadiag__subcmd__write)
            opts="-s -n -p -i -x -v -d -h -V --size --iters --counters --port --bind --persist --loopback --key-file --cm --ib-port --gid-index --mtu --tclass --sl --timeout --wait --max-size --max-qps --verbose --json --device --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ib-port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gid-index)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -x)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mtu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tclass)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sl)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                -d)
                    compopt +o default +o bashdefault 2>/dev/null
                    COMPREPLY=($(compgen -W "$(ls "${RDMADIAG_SYSFS_ROOT:-/sys/class/infiniband}" 2>/dev/null)" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _rdmadiag -o nosort -o bashdefault -o default rdmadiag
else
    complete -F _rdmadiag -o bashdefault -o default rdmadiag
fi
