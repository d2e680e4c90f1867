print("codec-benchmark: not yet written")
