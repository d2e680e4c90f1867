public import CoatyCore
public import Foundation
import CoatySync

extension NetworkState {
    /// Which events a state document carries.
    public enum EventSelection: Sendable, Hashable {
        /// The events after this sequence number, sampled down to `limit` (the live stream).
        case after(sequence: Int, limit: Int)
        /// The newest `count` kept events.
        case newest(Int)
    }

    /// Filters of `GET /api/events`; `nil` matches everything.
    public struct EventFilter: Sendable, Hashable {
        /// The event type name (`Advertise`, `Discover`, …), case-insensitive.
        public var event: String?
        /// The object type.
        public var objectType: String?
        /// The source agent: its id or (part of) its name, case-insensitive.
        public var agent: String?

        /// Creates a filter.
        /// - Parameters:
        ///   - event: The event type name.
        ///   - objectType: The object type.
        ///   - agent: The agent id or name.
        public init(event: String? = nil, objectType: String? = nil, agent: String? = nil) {
            self.event = event
            self.objectType = objectType
            self.agent = agent
        }
    }

    /// The whole state as the `state` message of <doc:ViewerData>.
    /// - Parameters:
    ///   - date: The time of the document (rates and latencies end there).
    ///   - events: Which events to include.
    /// - Returns: The document and the sequence number of its newest event (the cursor of the next `after`).
    public func state(at date: Date, events selection: EventSelection) -> (json: JSONValue, sequence: Int) {
        let now = Self.milliseconds(date)
        return model.withLock { model in
            var document = JSONObject()
            document["type"] = "state"
            document["time"] = .int(now)
            document["connection"] = model.connectionJSON()
            document["viewer"] = model.viewerJSON()
            document["totals"] = model.totalsJSON()
            document["agents"] = .array(model.agentsJSON())
            document["types"] = .array(model.typesJSON(latestUpTo: 2_048))
            document["rates"] = model.ratesJSON(now: now)
            document["latencies"] = model.latenciesJSON(now: now)
            let (events, skipped) = model.selectEvents(selection)
            document["events"] = .array(events.map { model.eventJSON($0) })
            document["eventsSkipped"] = .int(Int64(skipped))
            return (.object(document), model.sequence)
        }
    }

    /// `{"agents": […]}`.
    public func agentsJSON() -> JSONValue {
        model.withLock { model in .object(["agents": .array(model.agentsJSON())]) }
    }

    /// `{"types": […]}`.
    public func typesJSON() -> JSONValue {
        model.withLock { model in .object(["types": .array(model.typesJSON(latestUpTo: nil))]) }
    }

    /// One object type with its recent objects, newest first; `nil` when never seen.
    /// - Parameter objectType: The object type.
    /// - Returns: `{"objectType", "coreType", "count", "lastSeen", "objects"}`.
    public func objectTypeJSON(_ objectType: String) -> JSONValue? {
        model.withLock { model in
            guard let type = model.types[objectType] else { return nil }
            return .object([
                "objectType": .string(type.objectType),
                "coreType": .string(type.coreType),
                "count": .int(Int64(type.count)),
                "lastSeen": .int(type.lastSeen),
                "objects": .array(type.recent.reversed()),
            ])
        }
    }

    /// `{"events": […]}`: the newest `limit` kept events matching the filter, newest last.
    /// - Parameters:
    ///   - filter: The filter.
    ///   - limit: How many at most.
    /// - Returns: The document.
    public func eventsJSON(matching filter: EventFilter, limit: Int) -> JSONValue {
        model.withLock { model in
            var picked: [Event] = []
            let (eventName, agent) = (filter.event?.lowercased(), filter.agent?.lowercased())
            for event in model.orderedEvents().reversed() where picked.count < limit {
                if let eventName, event.event.name.lowercased() != eventName { continue }
                if let wanted = filter.objectType, event.objectType != wanted { continue }
                if let agent, !agent.isEmpty {
                    let name = model.agents[event.sourceId]?.name?.lowercased() ?? ""
                    guard event.sourceId == agent || name.contains(agent) else { continue }
                }
                picked.append(event)
            }
            return .object(["events": .array(picked.reversed().map { model.eventJSON($0) })])
        }
    }
}

extension NetworkState.Model {
    func connectionJSON() -> JSONValue {
        .object([
            "state": .string(connection.rawValue),
            "broker": .string(broker),
            "since": .int(connectionSince),
            "reconnects": .int(Int64(reconnects)),
        ])
    }

    func viewerJSON() -> JSONValue {
        var viewer = JSONObject()
        if let identity = self.viewer {
            viewer["identityId"] = .string(identity.objectId.description)
            viewer["name"] = .string(identity.name)
        }
        viewer["namespace"] = .string(namespace)
        viewer["startedAt"] = .int(startedAt)
        return .object(viewer)
    }

    func totalsJSON() -> JSONValue {
        var totals = JSONObject()
        totals["events"] = .int(Int64(totalEvents))
        totals["bytes"] = .int(Int64(totalBytes))
        totals["invalid"] = .int(Int64(invalid))
        totals["twins"] = .int(Int64(twins))
        if let lastInvalid {
            totals["lastInvalid"] = .object([
                "time": .int(lastInvalid.time),
                "topic": .string(lastInvalid.topic),
                "reason": .string(lastInvalid.reason),
            ])
        }
        if overflowTypeObjects > 0 { totals["overflowTypeObjects"] = .int(Int64(overflowTypeObjects)) }
        var byEvent = JSONObject()
        for (event, count) in sortedEventCounts() { byEvent[event.name] = .int(Int64(count)) }
        totals["byEvent"] = .object(byEvent)
        return .object(totals)
    }

    func sortedEventCounts() -> [(CommunicationEventType, Int)] {
        byEvent.sorted { $0.key.name < $1.key.name }.map { ($0.key, $0.value) }
    }

    func agentsJSON() -> [JSONValue] {
        // Online agents by name, then those that left, the latest first.
        let sorted = agents.values.sorted { lhs, rhs in
            if lhs.online != rhs.online { return lhs.online }
            if !lhs.online, lhs.left != rhs.left { return (lhs.left ?? 0) > (rhs.left ?? 0) }
            let (left, right) = ((lhs.name ?? "~").lowercased(), (rhs.name ?? "~").lowercased())
            return left != right ? left < right : lhs.objectId < rhs.objectId
        }
        return sorted.map { agent in
            var json = JSONObject()
            json["objectId"] = .string(agent.objectId)
            if let name = agent.name { json["name"] = .string(name) }
            json["namespace"] = .string(agent.namespace)
            json["online"] = .bool(agent.online)
            json["since"] = .int(agent.since)
            json["lastSeen"] = .int(agent.lastSeen)
            if let left = agent.left {
                json["left"] = .int(left)
                json["leftBy"] = "deadvertise"
            }
            json["events"] = .int(Int64(agent.events))
            if let identity = agent.identity { json["identity"] = .object(identity) }
            if let info = agent.agentInfo { json["agentInfo"] = info }
            if agent.objectId == viewer?.objectId.description { json["isViewer"] = .bool(true) }
            return .object(json)
        }
    }

    func typesJSON(latestUpTo largest: Int?) -> [JSONValue] {
        types.values.sorted { $0.objectType < $1.objectType }.map { type in
            var json = JSONObject()
            json["objectType"] = .string(type.objectType)
            json["coreType"] = .string(type.coreType)
            json["count"] = .int(Int64(type.count))
            json["lastSeen"] = .int(type.lastSeen)
            if let latest = type.recent.last {
                // Sized when it arrived: the state message is made twice a second per page, under the lock.
                if let largest, type.latestSize > largest, let object = latest.objectValue {
                    json["latest"] = NetworkState.stub(of: object, size: type.latestSize)
                } else {
                    json["latest"] = latest
                }
            }
            return .object(json)
        }
    }

    /// Oldest first.
    func orderedEvents() -> [NetworkState.Event] {
        Array(events[eventsStart...] + events[..<eventsStart])
    }

    func selectEvents(_ selection: NetworkState.EventSelection) -> ([NetworkState.Event], Int) {
        let ordered = orderedEvents()
        switch selection {
        case .newest(let count):
            return (Array(ordered.suffix(count)), 0)
        case .after(let cursor, let limit):
            let newer = ordered.drop { $0.sequence <= cursor }
            let arrived = max(0, sequence - cursor)
            guard newer.count > limit, limit > 0 else { return (Array(newer), arrived - newer.count) }
            // Evenly spaced over what is kept, the newest always in.
            let kept = Array(newer)
            var picked: [NetworkState.Event] = []
            picked.reserveCapacity(limit)
            for slot in 0..<limit {
                picked.append(kept[(slot + 1) * kept.count / limit - 1])
            }
            return (picked, arrived - picked.count)
        }
    }

    func eventJSON(_ event: NetworkState.Event) -> JSONValue {
        var json = JSONObject()
        json["seq"] = .int(Int64(event.sequence))
        json["time"] = .int(event.time)
        json["event"] = .string(event.event.name)
        json["topic"] = .string(event.topic)
        json["namespace"] = .string(event.namespace)
        json["sourceId"] = .string(event.sourceId)
        if let name = agents[event.sourceId]?.name { json["sourceName"] = .string(name) }
        if let objectType = event.objectType { json["objectType"] = .string(objectType) }
        if let correlationId = event.correlationId { json["correlationId"] = .string(correlationId) }
        json["size"] = .int(Int64(event.size))
        return .object(json)
    }

    func ratesJSON(now: Int64) -> JSONValue {
        let newest = now / NetworkState.rateBucket
        let oldest = newest - Int64(NetworkState.rateBuckets) + 1
        var series = JSONObject()
        for (event, counts) in rates.sorted(by: { $0.key.name < $1.key.name }) {
            var values: [JSONValue] = []
            values.reserveCapacity(NetworkState.rateBuckets)
            for bucket in oldest...newest {
                let slot = Int(bucket % Int64(NetworkState.rateBuckets))
                values.append(.int(rateBucketNumbers[slot] == bucket ? Int64(counts[slot]) : 0))
            }
            series[event.name] = .array(values)
        }
        return .object([
            "interval": .int(NetworkState.rateBucket),
            "start": .int(oldest * NetworkState.rateBucket),
            "series": .object(series),
        ])
    }

    func latenciesJSON(now: Int64) -> JSONValue {
        let newest = now / NetworkState.latencyBucket
        let oldest = newest - Int64(NetworkState.latencyBuckets) + 1
        var series = JSONObject()
        var overall = JSONObject()
        for (event, buckets) in latencies.sorted(by: { $0.key.name < $1.key.name }) {
            var values: [JSONValue] = []
            var all: [Double] = []
            var total = 0
            for index in oldest...newest {
                let slot = Int(index % Int64(NetworkState.latencyBuckets))
                guard let bucket = buckets[slot], bucket.index == index else {
                    values.append(.null)
                    continue
                }
                values.append(Self.percentiles(bucket.samples, count: bucket.count))
                all += bucket.samples
                total += bucket.count
            }
            series[event.name] = .array(values)
            if total > 0 { overall[event.name] = Self.percentiles(all, count: total) }
        }
        return .object([
            "interval": .int(NetworkState.latencyBucket),
            "start": .int(oldest * NetworkState.latencyBucket),
            "series": .object(series),
            "overall": .object(overall),
        ])
    }

    /// `{"count", "p50", "p90", "p99"}` of the samples (nearest rank), rounded to 0.001 ms.
    static func percentiles(_ samples: [Double], count: Int) -> JSONValue {
        let sorted = samples.sorted()
        func rank(_ p: Double) -> JSONValue {
            guard !sorted.isEmpty else { return .null }
            let index = min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))
            return .double((sorted[index] * 1_000).rounded() / 1_000)
        }
        return .object(["count": .int(Int64(count)), "p50": rank(0.5), "p90": rank(0.9), "p99": rank(0.99)])
    }
}
