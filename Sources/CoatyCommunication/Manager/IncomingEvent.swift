import CoatyFilter
import CoatyModel
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// A received event, decoded once and handed to every matching route.
package struct IncomingEvent: Sendable {
    /// The decoded payload, by event type.
    package enum Payload: Sendable {
        case advertise(AdvertiseEventData)
        case deadvertise(DeadvertiseEventData)
        case channel(ChannelEventData)
        case discover(DiscoverEventData)
        case resolve(ResolveEventData)
        case query(QueryEventData)
        case retrieve(RetrieveEventData)
        case update(UpdateEventData)
        case complete(CompleteEventData)
        case call(CallEventData)
        case `return`(ReturnEventData)
        case associate(AssociateEventData)
        case ioValue([UInt8])
    }

    /// The topic it arrived on.
    package let topic: CoatyTopic
    /// The payload.
    package let payload: Payload
    /// The MQTT 5 user properties it came with (a trace context; none over MQTT 3.1.1).
    package let userProperties: [MQTTUserProperty]

    package init(topic: CoatyTopic, payload: Payload, userProperties: [MQTTUserProperty] = []) {
        self.topic = topic
        self.payload = payload
        self.userProperties = userProperties
    }
}

extension IncomingEvent.Payload {
    /// Reads a received payload of `eventType` (objects straight from the text where the event
    /// carries one); `nil` for Raw messages, which carry no Coaty payload.
    init?(received bytes: [UInt8], eventType: CommunicationEventType, registry: CoatyObjectRegistry)
        throws(CommunicationEventDataError)
    {
        switch eventType {
        case .advertise: self = .advertise(try AdvertiseEventData(receivedBytes: bytes, registry: registry))
        case .deadvertise: self = .deadvertise(try DeadvertiseEventData(bytes: bytes, registry: registry))
        case .channel: self = .channel(try ChannelEventData(receivedBytes: bytes, registry: registry))
        case .discover: self = .discover(try DiscoverEventData(bytes: bytes, registry: registry))
        case .resolve: self = .resolve(try ResolveEventData(receivedBytes: bytes, registry: registry))
        case .query: self = .query(try QueryEventData(bytes: bytes, registry: registry))
        case .retrieve: self = .retrieve(try RetrieveEventData(bytes: bytes, registry: registry))
        case .update: self = .update(try UpdateEventData(receivedBytes: bytes, registry: registry))
        case .complete: self = .complete(try CompleteEventData(receivedBytes: bytes, registry: registry))
        case .call: self = .call(try CallEventData(bytes: bytes, registry: registry))
        case .return: self = .return(try ReturnEventData(bytes: bytes, registry: registry))
        case .associate: self = .associate(try AssociateEventData(bytes: bytes, registry: registry))
        case .ioValue: self = .ioValue(bytes)
        case .raw: return nil
        }
    }

    /// The event's data; `nil` for an IO value (its bytes are not a Coaty payload).
    var data: (any CommunicationEventData)? {
        switch self {
        case .advertise(let data): data
        case .deadvertise(let data): data
        case .channel(let data): data
        case .discover(let data): data
        case .resolve(let data): data
        case .query(let data): data
        case .retrieve(let data): data
        case .update(let data): data
        case .complete(let data): data
        case .call(let data): data
        case .return(let data): data
        case .associate(let data): data
        case .ioValue: nil
        }
    }
}

/// Receives the events of a route, on the thread that routes received messages (never block it).
package typealias EventSink = @Sendable (IncomingEvent) -> Void
typealias RawSink = @Sendable (RawEvent) -> Void
