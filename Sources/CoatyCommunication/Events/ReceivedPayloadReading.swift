import CoatyFilter
public import CoatyModel

/// The two readings of a received payload, for fuzzing and differential tests (SPI `Fuzzing`,
/// not part of the public API): the communication manager's own reading (objects straight from
/// the text where it can) and the reference reading (the payload parsed as a tree, then read).
@_spi(Fuzzing)
public enum ReceivedPayloadReading {
    /// What a reading gave: the payload's JSON as the event type reads it back (its `json`),
    /// or the error.
    public typealias Outcome = Result<JSONObject, CommunicationEventDataError>

    /// Reads `bytes` as a payload of `eventType` both ways.
    /// - Parameters:
    ///   - eventType: the event type (`ioValue` and `raw` carry no Coaty payload: both `nil`).
    ///   - bytes: the payload.
    ///   - registry: the registry objects are decoded with.
    /// - Returns: the manager's reading and the reference reading.
    public static func read(_ eventType: CommunicationEventType, _ bytes: [UInt8], registry: CoatyObjectRegistry)
        -> (received: Outcome?, tree: Outcome?)
    {
        guard let type = dataType(eventType) else { return (nil, nil) }
        let received: Outcome
        do throws(CommunicationEventDataError) {
            let payload = try IncomingEvent.Payload(received: bytes, eventType: eventType, registry: registry)
            received = .success(payload?.data?.json ?? [:])
        } catch {
            received = .failure(error)
        }
        return (received, treeReading(type, bytes, registry: registry))
    }

    /// The type of an event's data; `nil` for IO values and Raw messages.
    private static func dataType(_ eventType: CommunicationEventType) -> (any CommunicationEventData.Type)? {
        switch eventType {
        case .advertise: AdvertiseEventData.self
        case .deadvertise: DeadvertiseEventData.self
        case .channel: ChannelEventData.self
        case .discover: DiscoverEventData.self
        case .resolve: ResolveEventData.self
        case .query: QueryEventData.self
        case .retrieve: RetrieveEventData.self
        case .update: UpdateEventData.self
        case .complete: CompleteEventData.self
        case .call: CallEventData.self
        case .return: ReturnEventData.self
        case .associate: AssociateEventData.self
        case .ioValue, .raw: nil
        }
    }

    /// The payload parsed as a tree, then read as `T` (``CommunicationEventData/init(bytes:registry:)``).
    private static func treeReading<T: CommunicationEventData>(
        _ type: T.Type,
        _ bytes: [UInt8],
        registry: CoatyObjectRegistry
    ) -> Outcome {
        do throws(CommunicationEventDataError) {
            return .success(try T(bytes: bytes, registry: registry).json)
        } catch {
            return .failure(error)
        }
    }
}
