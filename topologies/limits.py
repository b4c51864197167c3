"""What this host can emulate, and what names and addresses allow: the limits
the schema, the kinds of fabric and the checks of a whole fabric share."""

IFNAME_MAX = 15          # Linux IFNAMSIZ - 1
MAX_SERVERS = 512        # endpoints (servers, or GPUs): beyond this a 2-core host spends
                         # minutes building
MAX_SWITCHES = 128
MAX_PER_LEAF = 254          # endpoints homed on one leaf: the last octet of <net>.l.k
