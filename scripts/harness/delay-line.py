#!/usr/bin/env python3
"""A delay line between network namespaces, for simulated regions on one machine (no netem needed).

One TUN device per node. A node is a region (its TUN is moved into a network namespace of its own) or the
root namespace (the load generator's side). Every packet a node sends to another node's address is read from
the sender's TUN and written to the receiver's TUN after that link's one-way delay. A cut link drops
everything, both ways, silently (no reset, no ICMP), until it is healed.

Usage: delay-line.py '<json config>'
  {"prefix": "kg1234", "subnet": "10.77.3", "deadlineSeconds": 600,
   "nodes": [{"name": "a", "host": 1, "netns": true}, ..., {"name": "client", "host": 100, "netns": false}],
   "delays": {"a-b": 45, "a-c": 75, "b-c": 100}}   (ms one way; a pair not listed: no delay)

Names: namespace <prefix>-<name>, device <prefix><name> (at most 15 characters). Prints one line
`ready <json>` once every device is up, then answers each control line on stdin with one line on stdout:
  cut <x> <y> | heal <x> <y>     drop / pass everything between two nodes
  isolate <x> | rejoin <x>       cut / heal every link between region x and the other regions (the root node's
                                 link stays up: the load generator still sees what x answers)
  stats                          `stats <json>`: packets passed and dropped per link ("x-y", both ways)
  quit                           remove everything and exit
It removes every namespace and device it made at exit: on quit, when stdin closes (its parent died), on
SIGTERM/SIGINT/SIGHUP, and at the deadline.
"""

import fcntl
import heapq
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def ip(*args):
    subprocess.run(["ip", *args], check=True, stdout=subprocess.DEVNULL)


def ip_in(ns, *args):
    if ns is None:
        ip(*args)
    else:
        ip("netns", "exec", ns, "ip", *args)


def link_name(x, y):
    return "-".join(sorted((x, y)))


class DelayLine:
    def __init__(self, config):
        self.prefix = config["prefix"]
        self.subnet = config["subnet"]
        self.deadline = time.monotonic() + float(config.get("deadlineSeconds", 600))
        self.delays = {link_name(*k.split("-")): float(v) / 1000.0 for k, v in config.get("delays", {}).items()}
        self.nodes = config["nodes"]
        self.namespaces = []
        self.root_devices = []
        self.fds = {}  # fd -> node name
        self.fd_of = {}  # node name -> fd
        self.node_of_host = {}  # last address byte -> node name
        self.regions = set()
        self.cut = set()
        self.passed = {}
        self.dropped = {}
        self.queue = []  # (due, seq, fd, packet)
        self.seq = 0

    def setup(self):
        for node in self.nodes:
            name = node["name"]
            dev = f"{self.prefix}{name}"
            if len(dev) > 15:
                raise ValueError(f"device name {dev} is longer than 15 characters")
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
            fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", dev.encode(), IFF_TUN | IFF_NO_PI))
            ns = None
            if node.get("netns", True):
                ns = f"{self.prefix}-{name}"
                ip("netns", "add", ns)
                self.namespaces.append(ns)
                # The fd stays attached to the device after it moves: packets still come and go through it here.
                ip("link", "set", dev, "netns", ns)
                ip_in(ns, "link", "set", "lo", "up")
                self.regions.add(name)
            else:
                self.root_devices.append(dev)
            ip_in(ns, "addr", "add", f"{self.subnet}.{node['host']}/24", "dev", dev)
            ip_in(ns, "link", "set", dev, "up")
            self.fds[fd] = name
            self.fd_of[name] = fd
            self.node_of_host[int(node["host"])] = name

    def cleanup(self):
        for fd in list(self.fds):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()
        # Closing a TUN's last fd removes the device; removing a namespace removes what is left in it.
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        for dev in self.root_devices:
            subprocess.run(["ip", "link", "del", dev], stderr=subprocess.DEVNULL)
        self.namespaces = []
        self.root_devices = []

    def count(self, table, link):
        table[link] = table.get(link, 0) + 1

    def route(self, src, packet):
        # IPv4 only: the destination address is bytes 16..19; anything else (IPv6 router solicitations) is dropped.
        if len(packet) < 20 or packet[0] >> 4 != 4 or packet[16:19] != self.subnet_bytes:
            return
        dst = self.node_of_host.get(packet[19])
        if dst is None or dst == src:
            return
        link = link_name(src, dst)
        if link in self.cut:
            self.count(self.dropped, link)
            return
        self.count(self.passed, link)
        due = time.monotonic() + self.delays.get(link, 0.0)
        self.seq += 1
        heapq.heappush(self.queue, (due, self.seq, link, self.fd_of[dst], packet))

    def flush_due(self):
        now = time.monotonic()
        while self.queue and self.queue[0][0] <= now:
            _, _, link, fd, packet = heapq.heappop(self.queue)
            # A link cut while the packet was on the wire loses it, as a real one would.
            if link in self.cut:
                self.count(self.dropped, link)
                continue
            try:
                os.write(fd, packet)
            except OSError:
                pass

    def control(self, line):
        words = line.split()
        if not words:
            return "ok"
        cmd, args = words[0], words[1:]
        if cmd in ("cut", "heal") and len(args) == 2 and all(a in self.fd_of for a in args):
            link = link_name(*args)
            (self.cut.add if cmd == "cut" else self.cut.discard)(link)
            return f"ok {cmd} {link}"
        if cmd in ("isolate", "rejoin") and len(args) == 1 and args[0] in self.regions:
            for other in self.regions - {args[0]}:
                link = link_name(args[0], other)
                (self.cut.add if cmd == "isolate" else self.cut.discard)(link)
            return f"ok {cmd} {args[0]}"
        if cmd == "stats" and not args:
            return "stats " + json.dumps({"passed": self.passed, "dropped": self.dropped, "cut": sorted(self.cut)})
        if cmd == "quit":
            raise SystemExit(0)
        return f"error unknown command: {line.strip()}"

    def run(self):
        self.subnet_bytes = bytes(int(p) for p in self.subnet.split("."))
        stdin = sys.stdin.fileno()
        os.set_blocking(stdin, False)
        pending = b""
        print("ready " + json.dumps({"namespaces": self.namespaces, "nodes": self.nodes}), flush=True)
        while True:
            now = time.monotonic()
            if now >= self.deadline:
                print("deadline reached", file=sys.stderr, flush=True)
                return
            timeout = self.deadline - now
            if self.queue:
                timeout = min(timeout, max(0.0, self.queue[0][0] - now))
            readable, _, _ = select.select([stdin, *self.fds], [], [], timeout)
            for fd in readable:
                if fd == stdin:
                    chunk = os.read(stdin, 4096)
                    if not chunk:
                        return  # the parent is gone
                    pending += chunk
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        print(self.control(line.decode()), flush=True)
                    continue
                src = self.fds[fd]
                # Drain what is waiting now, a bounded number at a time so one busy device cannot starve the rest.
                for _ in range(64):
                    try:
                        packet = os.read(fd, 65536)
                    except BlockingIOError:
                        break
                    self.route(src, packet)
            self.flush_due()


def main():
    line = DelayLine(json.loads(sys.argv[1]))

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        line.setup()
        line.run()
    finally:
        line.cleanup()


if __name__ == "__main__":
    main()
