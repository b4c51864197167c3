"""The ECMP controller: pure path computation (routes), pure OpenFlow message
building (ofmsg), and the os-ken app that glues them to switch events (app)."""
