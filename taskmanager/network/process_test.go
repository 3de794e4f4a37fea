package network

const producerEnv = "GOFL_NETWORK_BENCH_PRODUCER"

func runProducerProcess() int { return 0 }
