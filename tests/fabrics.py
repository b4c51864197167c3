"""Small fabrics for tests, written inline like a user would write them."""

from topologies.fabric import parse_fabric


def leaf_spine(spines, leaves, servers, parallel=1, policy="ecmp", rate=50, **extra_links):
    link = {"rate_mbit": rate, **extra_links}
    text = f"""
name: t{spines}x{leaves}
fabric: {{spines: {spines}, leaves: {leaves}, servers_per_leaf: {servers}, uplinks_per_spine: {parallel}}}
links:
  server_leaf: {link}
  leaf_spine: {link}
routing: {{policy: {policy}}}
"""
    return parse_fabric(text, f"t{spines}x{leaves}.yaml")
