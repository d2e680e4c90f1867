print("coaty")
