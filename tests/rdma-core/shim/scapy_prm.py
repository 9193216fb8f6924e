"""Serializes PRM command structures with rdma-core's own tests/mlx5_prm_structs.py.

Reads one JSON object per line from stdin, {"class": name, "fields": {field: value}},
where a value is an int, a list of ints, a string (MAC), or a nested object of the same
form (a PacketField), and writes the serialized bytes of each as one hex line.
Usage: scapy_prm.py <path of mlx5_prm_structs.py>
"""
import importlib.util
import json
import sys


def main():
    spec = importlib.util.spec_from_file_location("mlx5_prm_structs", sys.argv[1])
    structs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(structs)

    def build(obj):
        cls = getattr(structs, obj["class"])
        fields = {}
        for name, value in obj["fields"].items():
            fields[name] = build(value) if isinstance(value, dict) else value
        return cls(**fields)

    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if line:
            out.write(bytes(build(json.loads(line))).hex() + "\n")
    out.flush()


if __name__ == "__main__":
    main()
