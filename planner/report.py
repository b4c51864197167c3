"""The planner's report: a plan (what plan() returns, or its JSON) and the
AllReduce predictions on a fabric as text, and the formatters of counts,
numbers, ratios, durations and byte sizes they use."""

from __future__ import annotations

from planner.compute import DAYS_PER_YEAR, SECONDS_PER_DAY


def count_text(n):
    return f"{int(n):,}"


def number_text(x):
    """2.0e10 for big or tiny values, 40,000 or 12.5 otherwise."""
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e7 or abs(x) < 1e-3:
        mantissa, exponent = f"{x:.1e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    if x == int(x):
        return f"{int(x):,}"
    return f"{x:,.3g}" if abs(x) < 100 else f"{x:,.1f}"


def ratio_text(x):
    """3:1 for a downlink:uplink ratio of 3."""
    return f"{x:.3g}:1"


def _duration(seconds):
    s = float(seconds)
    if s < 1e-3:
        return f"{s * 1e6:.3g} us"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    if s < 120:
        return f"{s:.3g} s"
    if s < 2 * 3600:
        return f"{s / 60:.3g} minutes"
    if s < 2 * SECONDS_PER_DAY:
        return f"{s / 3600:.3g} hours"
    days = s / SECONDS_PER_DAY
    if days < 2 * DAYS_PER_YEAR:
        return f"{days:,.1f} days"
    return f"{days / DAYS_PER_YEAR:,.1f} years ({days:,.0f} days)"


def _bytes(n):
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def _design_fields(d):
    """A Design (from plan()) or its JSON form, as the JSON form."""
    return d.to_dict() if hasattr(d, "to_dict") else d


def format_plan(plan_dict) -> str:
    """A human-readable report of what `plan` (or its JSON) returned."""
    inp = plan_dict["inputs"]
    designs = [_design_fields(d) for d in plan_dict["designs"]]
    lines = [
        f"Plan for {count_text(inp['gpus'])} GPUs: {count_text(plan_dict['servers'])} servers x "
        f"{inp['gpus_per_server']} GPUs, {inp['nics_per_server']} scale-out NIC(s) per server "
        f"= {count_text(plan_dict['endpoints'])} endpoints",
        f"Switch radix {inp['radix']}, links {number_text(inp['link_gbps'])} Gbit/s, "
        f"requested oversubscription {ratio_text(inp['oversubscription'])}",
        "",
    ]
    lines += _design_table(designs) + [""] + _design_notes(designs, inp["radix"])
    lines += _training_lines(plan_dict["training"])
    if plan_dict.get("allreduce"):
        lines += _allreduce_lines(plan_dict["allreduce"])
    return "\n".join(lines)


def _design_table(designs) -> list:
    """One row per design, names left-aligned and counts right-aligned."""
    header = ("design", "fits", "switches", "switch ports", "cables", "ports/endpoint",
              "max hops", "bisection Tbit/s", "oversub")
    rows = [header] + [
        (d["name"], "yes" if d["fits"] else "no", count_text(d["switches"]),
         count_text(d["switch_ports"]), count_text(d["cables"]), count_text(d["ports_per_endpoint"]),
         str(d["max_hops"]), number_text(d["bisection_gbps"] / 1000.0), ratio_text(d["oversubscription"]))
        for d in designs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [cell.rjust(w) for cell, w in zip(row[2:], widths[2:])]
        lines.append("  ".join(cells).rstrip())
    return lines


def _design_notes(designs, radix) -> list:
    """Per design: how many endpoints it holds, its switches by tier, and why
    it does not fit when it does not."""
    lines = []
    for d in designs:
        tiers = " + ".join(f"{count_text(n)} {tier}" for tier, n in d["switches_by_tier"].items())
        what = f"{d['name']}: holds up to {count_text(d['max_endpoints'])} endpoints at radix {radix}"
        if tiers:
            what += f"; switches: {tiers}"
        if not d["switches_by_tier"]:          # no switches: the cables are its cost
            what += f"; {number_text(d['cables'])} cables"
        if d["fits"] and d["needed_radix"]:
            what += f"; radix {count_text(d['needed_radix'])} would do"
        lines.append(what)
        if not d["fits"]:
            lines.append(f"    does not fit: {d['reason']}")
    return lines


def _training_lines(t) -> list:
    return [
        "",
        f"Training {number_text(t['total_flops'])} FLOPs:",
        f"  FLOP/s per GPU      {number_text(t['gpu_flops'])}",
        f"  FLOPs per GPU-day   {number_text(t['flops_per_day'])}",
        f"  on one GPU          {_duration(t['seconds_one_gpu'])}",
        f"  on {count_text(t['gpus'])} GPUs".ljust(22) + f"{_duration(t['seconds_all_gpus'])} "
        f"({t['days_all_gpus']:.3g} days; ideal scaling at {t['utilisation']:.0%} utilisation)",
    ]


def _allreduce_lines(ar) -> list:
    return [
        "",
        f"AllReduce of {_bytes(ar['gradient_bytes'])} (alpha {number_text(ar['alpha_s'] * 1e6)} us, "
        f"scale-out {number_text(ar['link_gbps'])} Gbit/s, in-server {number_text(ar['intra_gbps'])} Gbit/s):",
        f"  flat ring over {count_text(ar['gpus'])} GPUs: {_duration(ar['ring_seconds'])}",
        f"  hierarchical, {count_text(ar['nodes'])} servers x {ar['gpus_per_node']} GPUs, "
        f"pipelined: {_duration(ar['hierarchical_seconds'])} ({ar['speedup']:.3g}x faster)",
    ] + _nccl_line(ar.get("nccl"))


def _nccl_line(nccl) -> list:
    """What NCCL would run, where the plan has it (planner/nccl_plan.py);
    held to the least time its bytes can move where NCCL's model is faster."""
    if not nccl:
        return []
    head = (f"  as NCCL runs it ({nccl['server']} servers, {nccl.get('network', 'RoCEv2')}, "
            "nothing colliding): ")
    said = (f"says {_duration(nccl.get('model_seconds', 0))} for {nccl['ran']})")
    if nccl.get("at_minimum") and nccl.get("bound") == "in-server":
        return [head + f"{_duration(nccl['seconds'])}, the in-server links' physical minimum: "
                f"each GPU sends its {_bytes(nccl['size_bytes'])} at least once through its "
                f"{number_text(nccl['in_server_gbps'])} Gbit/s link (NCCL's own model, pricing the "
                f"{nccl['server']}'s NVLink, " + said]
    if nccl.get("at_minimum"):
        m = nccl["servers"]
        return [head + f"{_duration(nccl['seconds'])}, the NICs' physical minimum: each of "
                f"{count_text(m)} servers sends 2({m:,}-1)/{m:,} of the bytes through "
                f"{nccl['nics']} NIC(s) of {number_text(nccl['nic_gbps'])} Gbit/s (NCCL's own model, "
                "whose slowest channel is 0.12 GB/s, " + said]
    return [head + f"{_duration(nccl['seconds'])}, {nccl['ran']} on {nccl['channels']} channels "
            "(the lines above are alpha-beta closed forms; --simulate adds the fabric)"]


def format_fabric(fabric, rows, calibration=None, source="") -> str:
    """The AllReduce predictions on `fabric` (fabric_predictions' rows), with
    the calibration and measured times when there are some."""
    f = fabric
    intra = f.link_classes.get("intra_node")
    lines = [f"AllReduce on {f.name} ({f.shape()})",
             f"  NIC links {f.nic_rate_mbit:g} Mbit/s"
             + (f", NVLink-class links {intra.rate_mbit:g} Mbit/s" if intra else "")
             + f", MTU {f.mtu}"]
    if calibration:
        lines.append(f"  calibrated from {source or 'an emulated run'} over "
                     f"{len(calibration['points'])} size(s): alpha {calibration['alpha_s'] * 1e3:.2f} ms "
                     f"per step, bandwidth term x{calibration['kappa']:.2f}"
                     + (f" (efficiency {1 / calibration['kappa']:.0%})"
                        if calibration["kappa"] else ""))
        if calibration.get("skipped"):
            lines.append(f"  left out of the fit: {len(calibration['skipped'])} size(s) the run "
                         "flagged as not to quote ("
                         + ", ".join(f"{s['size_bytes']:,} B" for s in calibration["skipped"])
                         + ")")
    head = f"  {'size':>10}  {'algorithm':<13} {'steps':>5}  {'model s':>9}"
    if calibration:
        head += f"  {'calibrated s':>12}  {'measured s':>10}  {'meas/cal':>8}"
    lines.append(head)
    for r in rows:
        line = (f"  {_bytes(r['size_bytes']):>10}  {r['algorithm']:<13} {r['steps']:>5}  "
                f"{r['model_s']:9.3f}")
        if calibration:
            meas = r.get("measured_s")
            line += (f"  {r['calibrated_s']:12.3f}  "
                     + (f"{meas:10.3f}  {meas / r['calibrated_s']:8.2f}" if meas else
                        f"{'-':>10}  {'-':>8}"))
        lines.append(line)
    return "\n".join(lines)
