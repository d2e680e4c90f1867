// CoatyCore is the transport-independent core of CoatyKit, one import for the five modules it is
// built from, each with one job (arrows point one way):
//
//   CoatyModel          objects, core types, the registry, JSON and its codec
//     ← CoatyFilter          ObjectFilter, the matcher, collation
//       ← CoatyStore           the repository SPI, the in-memory backend, database options
//       ← CoatyCommunication   events, topics, the transport protocol, the communication manager, IO routing
//         ← CoatyRuntime         the agent container, controllers, configuration (with its databases), logging
//
// Import a single module to depend on less (a store backend needs CoatyModel, CoatyFilter and CoatyStore only).

@_exported import CoatyCommunication
@_exported import CoatyFilter
@_exported import CoatyModel
@_exported import CoatyRuntime
@_exported import CoatyStore
