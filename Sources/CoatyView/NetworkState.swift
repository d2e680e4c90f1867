public import CoatyCore
public import Foundation
import CoatySync

/// What a viewer knows about a Coaty network: the agents online, the object types seen, recent
/// events, event rates and request→response latencies — built from the raw messages of the
/// network's `coaty/…` topics, bounded in memory whatever the rate.
///
/// Feed it every message a broker delivers on `coaty/3/<namespace>/#` with
/// ``receive(topic:payload:at:)``; read it as JSON with ``state(at:since:)`` (the document
/// <doc:ViewerData> describes). Counts are exact; only the events shown are sampled.
///
/// ```swift
/// let network = NetworkState()
/// network.receive(topic: "coaty/3/-/ADV:Identity/\(agentId)", payload: identityPayload, at: Date())
/// let json = network.state(at: Date(), since: nil)
/// ```
///
/// Bounds: ``Limits``. With the defaults the state holds at most 2 000 agents, 500 object types
/// with 20 recent objects each (objects over 8 KiB kept as a stub), 2 000 events, 10 000 open
/// requests and 30 latency buckets of 1 000 samples per request type: about 90 MB in the worst
/// case, a few MB on a typical network.
public final class NetworkState: Sendable {
    /// The memory bounds of a ``NetworkState``.
    public struct Limits: Sendable, Hashable {
        /// The agents kept (agents that left are forgotten first).
        public var agents = 2_000
        /// The object types kept; objects of further types are counted in ``NetworkState/overflowTypes``.
        public var objectTypes = 500
        /// The recent objects kept per object type.
        public var recentObjectsPerType = 20
        /// Objects larger than this (serialized bytes) are kept as a stub with their ids, type, name and size.
        public var largestKeptObject = 8 * 1_024
        /// The recent events kept (for `GET /api/events` and the live stream).
        public var events = 2_000
        /// The requests waiting for their first response; the oldest are forgotten beyond it.
        public var openRequests = 10_000
        /// The latency samples kept per request type and 10 s bucket (a uniform sample beyond it).
        public var latencySamplesPerBucket = 1_000

        /// The default bounds.
        public init() {}
    }

    /// The state of the viewer's connection to the broker.
    public enum ConnectionState: String, Sendable, Hashable {
        /// Connected; messages arrive.
        case online
        /// Connecting for the first time.
        case connecting
        /// The broker is gone; the viewer reconnects by itself and keeps what it has seen.
        case offline
    }

    /// The length of one rate bucket (1 s) and how many are kept (5 minutes).
    static let rateBucket: Int64 = 1_000
    static let rateBuckets = 300
    /// The length of one latency bucket (10 s) and how many are kept (5 minutes).
    static let latencyBucket: Int64 = 10_000
    static let latencyBuckets = 30
    /// Requests older than this without a response are forgotten.
    static let requestExpiry: Int64 = 60_000

    /// The bounds this state keeps.
    public let limits: Limits
    let model: CoatyMutex<Model>

    /// Creates an empty state.
    /// - Parameters:
    ///   - limits: The memory bounds.
    ///   - broker: The broker URL shown.
    ///   - viewer: The viewer's own identity (shown as the viewer; its events are counted like any other).
    ///   - namespace: The namespace observed (`+` for every namespace).
    ///   - startedAt: When the viewer started.
    public init(
        limits: Limits = Limits(),
        broker: String = "",
        viewer: Identity? = nil,
        namespace: String = CoatyTopic.defaultNamespace,
        startedAt: Date = Date()
    ) {
        self.limits = limits
        model = CoatyMutex(
            Model(
                limits: limits,
                broker: broker,
                viewer: viewer,
                namespace: namespace,
                startedAt: Self.milliseconds(startedAt)
            )
        )
    }

    /// Milliseconds since 1970.
    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1_000).rounded()) }

    /// Takes one message of a `coaty/…` topic into the state.
    ///
    /// A topic that is not a valid Coaty topic, or a payload that is not what its event requires,
    /// is counted as invalid (``invalidCount``, the last reason shown) and otherwise ignored.
    /// - Parameters:
    ///   - topic: The MQTT topic.
    ///   - payload: The payload bytes.
    ///   - date: When it arrived.
    public func receive(topic: String, payload: [UInt8], at date: Date) {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let parsed = Self.parse(topic: topic, payload: payload)
        model.withLock { model in
            switch parsed {
            case .success(let message): model.take(message, topic: topic, size: payload.count, micros: micros)
            case .failure(let invalid): model.reject(topic: topic, reason: invalid.reason, now: micros / 1_000)
            }
        }
    }

    /// Records the viewer's connection state.
    /// - Parameters:
    ///   - state: The new state.
    ///   - date: When it changed.
    public func setConnection(_ state: ConnectionState, at date: Date) {
        let now = Self.milliseconds(date)
        model.withLock { model in
            guard model.connection != state else { return }
            if state == .online, model.connection == .offline { model.reconnects += 1 }
            model.connection = state
            model.connectionSince = now
        }
    }

    /// The number of messages that were not valid Coaty events.
    public var invalidCount: Int { model.withLock { $0.invalid } }

    /// The number of events taken.
    public var eventCount: Int { model.withLock { $0.totalEvents } }

    /// Objects of object types beyond ``Limits/objectTypes``, counted but not kept.
    public var overflowTypes: Int { model.withLock { $0.overflowTypeObjects } }

    /// The sequence number of the newest event (0 before the first).
    public var latestSequence: Int { model.withLock { $0.sequence } }

    /// What is kept of an object too large to keep: its ids, type and name, `truncated` and its size.
    static func stub(of object: JSONObject, size: Int) -> JSONValue {
        var stub = JSONObject()
        for key in ["objectType", "coreType", "objectId", "name", "externalId"] {
            if let member = object[key] { stub[key] = member }
        }
        stub["truncated"] = .bool(true)
        stub["size"] = .int(Int64(size))
        return .object(stub)
    }

    // MARK: Parsing (outside the lock)

    struct Invalid: Error {
        let reason: String
    }

    /// An event read from its topic and payload.
    struct Message {
        let topic: CoatyTopic
        let payload: JSONObject?
        /// The objects the payload carries (Advertise, Channel, Resolve, Retrieve, Update, Complete).
        let objects: [JSONObject]
    }

    static func parse(topic name: String, payload: [UInt8]) -> Result<Message, Invalid> {
        let topic: CoatyTopic
        do {
            topic = try CoatyTopic(parsing: name)
        } catch {
            return .failure(Invalid(reason: "not a Coaty topic: \(error)"))
        }
        if topic.eventType == .ioValue { return .success(Message(topic: topic, payload: nil, objects: [])) }
        let json: JSONObject
        do {
            guard let object = try JSONValue(parsing: payload).objectValue else {
                return .failure(Invalid(reason: "\(topic.eventType.name) payload is not a JSON object"))
            }
            json = object
        } catch {
            return .failure(Invalid(reason: "\(topic.eventType.name) payload is not JSON: \(error)"))
        }
        var objects: [JSONObject] = []
        func required(_ key: String) -> Result<Message, Invalid>? {
            guard let object = json[key]?.objectValue else {
                return .failure(Invalid(reason: "\(topic.eventType.name) payload has no '\(key)' object"))
            }
            objects.append(object)
            return nil
        }
        switch topic.eventType {
        case .advertise, .update, .complete:
            if let failure = required("object") { return failure }
        case .channel:
            if let object = json["object"]?.objectValue {
                objects.append(object)
            } else if let array = json["objects"]?.arrayValue {
                objects = array.compactMap(\.objectValue)
            } else {
                return .failure(Invalid(reason: "Channel payload has neither 'object' nor 'objects'"))
            }
        case .resolve:
            if let object = json["object"]?.objectValue { objects.append(object) }
            objects += (json["relatedObjects"]?.arrayValue ?? []).compactMap(\.objectValue)
            if json["object"] == nil, json["relatedObjects"] == nil {
                return .failure(Invalid(reason: "Resolve payload has neither 'object' nor 'relatedObjects'"))
            }
        case .retrieve:
            guard let array = json["objects"]?.arrayValue else {
                return .failure(Invalid(reason: "Retrieve payload has no 'objects' array"))
            }
            objects = array.compactMap(\.objectValue)
        case .deadvertise:
            guard json["objectIds"]?.arrayValue != nil else {
                return .failure(Invalid(reason: "Deadvertise payload has no 'objectIds' array"))
            }
        default:
            break
        }
        if let untyped = objects.first(where: { ($0["objectType"]?.stringValue ?? "").isEmpty }) {
            let id = untyped["objectId"]?.stringValue ?? "?"
            return .failure(Invalid(reason: "\(topic.eventType.name) carries an object without objectType (\(id))"))
        }
        return .success(Message(topic: topic, payload: json, objects: objects))
    }
}

// MARK: - The model (under the lock)

extension NetworkState {
    struct Agent {
        let objectId: String
        var name: String?
        var namespace: String
        var identity: JSONObject?
        var agentInfo: JSONValue?
        var online: Bool
        var since: Int64
        var lastSeen: Int64
        var left: Int64?
        var events = 0
    }

    struct ObjectType {
        let objectType: String
        var coreType: String
        var count = 0
        var lastSeen: Int64 = 0
        /// The latest version of the most recently seen objects (distinct object ids), newest last.
        var recent: [JSONValue] = []
        /// The serialized size of the newest object as it arrived (its kept copy may be a stub).
        var latestSize = 0
    }

    struct Event {
        let sequence: Int
        let time: Int64
        let event: CommunicationEventType
        let topic: String
        let namespace: String
        let sourceId: String
        let objectType: String?
        let correlationId: String?
        let size: Int
    }

    /// Latency samples of one request type in one 10 s bucket.
    struct LatencyBucket {
        var index: Int64
        var count = 0
        var samples: [Double] = []
    }

    struct OpenRequest {
        let event: CommunicationEventType
        /// Microseconds since 1970.
        let time: Int64
    }

    struct Model: ~Copyable {
        let limits: Limits
        let broker: String
        let viewer: Identity?
        let namespace: String
        let startedAt: Int64
        var connection = ConnectionState.connecting
        var connectionSince: Int64
        var reconnects = 0

        var totalEvents = 0
        var totalBytes = 0
        /// The core-type copies of Advertises and Updates published twice (not counted as events).
        var twins = 0
        var invalid = 0
        var lastInvalid: (time: Int64, topic: String, reason: String)?
        var byEvent: [CommunicationEventType: Int] = [:]

        var agents: [String: Agent] = [:]
        var types: [String: ObjectType] = [:]
        var overflowTypeObjects = 0

        /// The last ``Limits/events`` events, a ring.
        var events: [Event] = []
        var eventsStart = 0
        var sequence = 0

        /// Per event type, counts per 1 s bucket: a ring indexed by bucket number modulo ``rateBuckets``.
        var rates: [CommunicationEventType: [Int]] = [:]
        var rateBucketNumbers: [Int64]
        /// Per request type, a ring of 10 s buckets.
        var latencies: [CommunicationEventType: [LatencyBucket?]] = [:]
        var openRequests: [String: OpenRequest] = [:]
        var openOrder: [(String, Int64)] = []
        var openOrderStart = 0
        var random = SystemRandomNumberGenerator()

        init(limits: Limits, broker: String, viewer: Identity?, namespace: String, startedAt: Int64) {
            self.limits = limits
            self.broker = broker
            self.viewer = viewer
            self.namespace = namespace
            self.startedAt = startedAt
            connectionSince = startedAt
            rateBucketNumbers = Array(repeating: -1, count: NetworkState.rateBuckets)
            events.reserveCapacity(limits.events)
        }

        mutating func reject(topic: String, reason: String, now: Int64) {
            invalid += 1
            lastInvalid = (now, String(topic.prefix(300)), reason)
        }

        /// `micros`: microseconds since 1970 (request times are kept in µs: loopback answers take a fraction of a ms).
        mutating func take(_ message: Message, topic name: String, size: Int, micros: Int64) {
            let now = micros / 1_000
            let topic = message.topic
            let event = topic.eventType
            totalBytes += size
            // An Advertise or Update of an object whose type is not its core type's own goes out twice, on the core
            // type's topic and on the object type's: one Coaty event, counted once (on the object type's topic).
            if event == .advertise || event == .update, let coreType = topic.coreType,
                let objectType = message.objects.first?["objectType"]?.stringValue, objectType != coreType.objectType
            {
                twins += 1
                if event == .update, let correlationId = topic.correlationId.map(String.init) {
                    pairRequest(event, correlationId: correlationId, micros: micros)
                }
                return
            }
            totalEvents += 1
            byEvent[event, default: 0] += 1
            countRate(event, now: now)
            let sourceId = String(topic.sourceId)
            let namespace = String(topic.namespace)
            if event != .ioValue { touchAgent(sourceId, namespace: namespace, now: now) }
            var objectType = topic.objectType.map(String.init) ?? topic.coreType?.objectType
            for object in message.objects {
                takeObject(object, event: event, sourceId: sourceId, namespace: namespace, now: now)
            }
            if objectType == nil { objectType = message.objects.first?["objectType"]?.stringValue }
            if event == .deadvertise {
                for id in message.payload?["objectIds"]?.arrayValue ?? [] {
                    guard let id = id.stringValue, agents[id] != nil else { continue }
                    agents[id]?.online = false
                    agents[id]?.left = now
                }
            }
            let correlationId = topic.correlationId.map(String.init)
            if let correlationId { pairRequest(event, correlationId: correlationId, micros: micros) }
            sequence += 1
            let record = Event(
                sequence: sequence,
                time: now,
                event: event,
                topic: name,
                namespace: namespace,
                sourceId: sourceId,
                objectType: objectType,
                correlationId: correlationId,
                size: size
            )
            if events.count < limits.events {
                events.append(record)
            } else {
                events[eventsStart] = record
                eventsStart = (eventsStart + 1) % events.count
            }
        }

        mutating func touchAgent(_ id: String, namespace: String, now: Int64) {
            ensureAgent(id, namespace: namespace, now: now)
            agents[id]!.lastSeen = now
            agents[id]!.events += 1
        }

        /// Adds an agent not seen before (online since `now`), making room for it within the limit.
        mutating func ensureAgent(_ id: String, namespace: String, now: Int64) {
            guard agents[id] == nil else { return }
            makeRoomForAgent()
            agents[id] = Agent(objectId: id, namespace: namespace, online: true, since: now, lastSeen: now)
        }

        mutating func makeRoomForAgent() {
            guard agents.count >= limits.agents else { return }
            let victim =
                agents.values.filter { !$0.online }.min { $0.lastSeen < $1.lastSeen }
                ?? agents.values.min { $0.lastSeen < $1.lastSeen }
            if let victim { agents[victim.objectId] = nil }
        }

        mutating func takeObject(_ object: JSONObject, event: CommunicationEventType, sourceId: String, namespace: String, now: Int64) {
            let objectType = object["objectType"]?.stringValue ?? ""
            let coreType = object["coreType"]?.stringValue ?? "CoatyObject"
            if coreType == CoreType.identity.rawValue, let id = object["objectId"]?.stringValue,
                event == .advertise || event == .resolve
            {
                ensureAgent(id, namespace: namespace, now: now)
                if agents[id]!.online == false {
                    agents[id]!.online = true
                    agents[id]!.since = now
                    agents[id]!.left = nil
                }
                agents[id]!.identity = object
                agents[id]!.name = object["name"]?.stringValue
                agents[id]!.lastSeen = now
            }
            if coreType == CoreType.log.rawValue, let info = object["logHost"]?["agentInfo"], agents[sourceId] != nil {
                agents[sourceId]!.agentInfo = info
            }
            if types[objectType] == nil {
                guard types.count < limits.objectTypes else {
                    overflowTypeObjects += 1
                    return
                }
                types[objectType] = ObjectType(objectType: objectType, coreType: coreType)
            }
            let (kept, size) = keptObject(object)
            types[objectType]!.latestSize = size
            types[objectType]!.count += 1
            types[objectType]!.lastSeen = now
            types[objectType]!.coreType = coreType
            // The latest version of each object: one seen again moves to the end.
            if let id = object["objectId"]?.stringValue,
                let seen = types[objectType]!.recent.firstIndex(where: { $0["objectId"]?.stringValue == id })
            {
                types[objectType]!.recent.remove(at: seen)
            }
            if types[objectType]!.recent.count >= limits.recentObjectsPerType {
                types[objectType]!.recent.removeFirst()
            }
            types[objectType]!.recent.append(kept)
        }

        /// The object, or a stub of it when it is larger than ``Limits/largestKeptObject``, and its serialized size.
        func keptObject(_ object: JSONObject) -> (JSONValue, size: Int) {
            let value = JSONValue.object(object)
            let size = value.serializedBytes().count
            return (size > limits.largestKeptObject ? NetworkState.stub(of: object, size: size) : value, size)
        }

        mutating func countRate(_ event: CommunicationEventType, now: Int64) {
            let bucket = now / NetworkState.rateBucket
            let slot = Int(bucket % Int64(NetworkState.rateBuckets))
            if rateBucketNumbers[slot] != bucket {
                rateBucketNumbers[slot] = bucket
                for key in rates.keys { rates[key]![slot] = 0 }
            }
            if rates[event] == nil { rates[event] = Array(repeating: 0, count: NetworkState.rateBuckets) }
            rates[event]![slot] += 1
        }

        mutating func pairRequest(_ event: CommunicationEventType, correlationId: String, micros: Int64) {
            switch event {
            case .discover, .query, .update, .call:
                if openRequests[correlationId] == nil {
                    openRequests[correlationId] = OpenRequest(event: event, time: micros)
                    openOrder.append((correlationId, micros))
                    forgetOldRequests(micros: micros)
                }
            case .resolve, .retrieve, .complete, .return:
                guard let request = openRequests.removeValue(forKey: correlationId) else { return }
                recordLatency(request.event, milliseconds: Double(micros - request.time) / 1_000, now: micros / 1_000)
            default:
                break
            }
        }

        mutating func forgetOldRequests(micros: Int64) {
            while openOrderStart < openOrder.count {
                let (id, time) = openOrder[openOrderStart]
                let tooMany = openOrder.count - openOrderStart > limits.openRequests
                guard tooMany || micros - time > NetworkState.requestExpiry * 1_000 || openRequests[id] == nil else { break }
                if let open = openRequests[id], open.time == time { openRequests[id] = nil }
                openOrderStart += 1
            }
            if openOrderStart > 4_096, openOrderStart * 2 > openOrder.count {
                openOrder.removeFirst(openOrderStart)
                openOrderStart = 0
            }
        }

        mutating func recordLatency(_ event: CommunicationEventType, milliseconds: Double, now: Int64) {
            let index = now / NetworkState.latencyBucket
            let slot = Int(index % Int64(NetworkState.latencyBuckets))
            if latencies[event] == nil { latencies[event] = Array(repeating: nil, count: NetworkState.latencyBuckets) }
            if latencies[event]![slot]?.index != index { latencies[event]![slot] = LatencyBucket(index: index) }
            latencies[event]![slot]!.count += 1
            let count = latencies[event]![slot]!.count
            if latencies[event]![slot]!.samples.count < limits.latencySamplesPerBucket {
                latencies[event]![slot]!.samples.append(milliseconds)
            } else {
                // Reservoir sampling: every sample of the bucket is kept with the same probability.
                let pick = Int.random(in: 0..<count, using: &random)
                if pick < limits.latencySamplesPerBucket { latencies[event]![slot]!.samples[pick] = milliseconds }
            }
        }
    }
}
