// The throwaway mosquitto of the integration tests (MosquittoBroker) lives in CoatyLocalBroker, which `coaty demo`
// uses too without linking the rest of this testing product (SwiftNIO's fault-injecting proxy).
@_exported public import CoatyLocalBroker
