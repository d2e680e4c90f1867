// CoatyCore is the transport-independent core of CoatyKit, one import for the four modules it is
// built from, each with one job (arrows point one way):
//
//   CoatyModel          objects, core types, the registry, JSON and its codec
//     ← CoatyFilter          ObjectFilter, the matcher, collation
//       ← CoatyCommunication   events, topics, the transport protocol, the communication manager, IO routing
//         ← CoatyRuntime         the agent container, controllers, configuration, logging
//
// Import a single module to depend on less (a store needs CoatyModel and CoatyFilter only).

@_exported import CoatyCommunication
@_exported import CoatyFilter
@_exported import CoatyModel
@_exported import CoatyRuntime
