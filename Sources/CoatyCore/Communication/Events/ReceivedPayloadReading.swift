/// The two readings of a received payload, for fuzzing and differential tests (SPI `Fuzzing`,
/// not part of the public API): how the communication manager reads it (objects straight from
/// the text where it can) and the reference reading (the payload parsed as a tree, then read).
@_spi(Fuzzing)
public enum ReceivedPayloadReading {
    /// What a reading gave: the payload's JSON as the event type reads it back (its `json`),
    /// or the error's description.
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
        func outcome(_ read: () throws(CommunicationEventDataError) -> any CommunicationEventData) -> Outcome {
            do throws(CommunicationEventDataError) {
                return .success(try read().json)
            } catch {
                return .failure(error)
            }
        }
        func both<T: CommunicationEventData>(_ type: T.Type) -> (Outcome?, Outcome?) {
            let tree = outcome { () throws(CommunicationEventDataError) in try T(bytes: bytes, registry: registry) }
            return (tree, tree)
        }
        func objectCarrying<T: ObjectCarryingPayload>(_ type: T.Type) -> (Outcome?, Outcome?) {
            (
                outcome { () throws(CommunicationEventDataError) in try T(receivedBytes: bytes, registry: registry) },
                outcome { () throws(CommunicationEventDataError) in
                    try T(json: T.parsePayload(bytes), registry: registry)
                }
            )
        }
        switch eventType {
        case .advertise: return objectCarrying(AdvertiseEventData.self)
        case .channel: return objectCarrying(ChannelEventData.self)
        case .resolve: return objectCarrying(ResolveEventData.self)
        case .update: return objectCarrying(UpdateEventData.self)
        case .complete: return objectCarrying(CompleteEventData.self)
        case .deadvertise: return both(DeadvertiseEventData.self)
        case .discover: return both(DiscoverEventData.self)
        case .query: return both(QueryEventData.self)
        case .retrieve: return both(RetrieveEventData.self)
        case .call: return both(CallEventData.self)
        case .return: return both(ReturnEventData.self)
        case .associate: return both(AssociateEventData.self)
        case .ioValue, .raw: return (nil, nil)
        }
    }
}
