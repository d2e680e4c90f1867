print("mqtt-benchmark: not yet written")
