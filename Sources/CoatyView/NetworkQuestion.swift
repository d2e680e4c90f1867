public import CoatyCore
import Foundation

/// A Discover or a Query the viewer's page asks the network (`POST /api/ask`), read and checked
/// before anything is sent.
public struct NetworkQuestion: Sendable {
    /// The request to send.
    public enum Request: Sendable {
        /// A Discover.
        case discover(DiscoverEventData)
        /// A Query.
        case query(QueryEventData)
    }

    /// A request the page sent that cannot be asked, with one line saying why.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        /// What is wrong.
        public let description: String
    }

    /// The request.
    public let request: Request
    /// How long answers are collected.
    public let timeout: Duration

    /// The default time answers are collected (2 s, as `coaty discover` waits).
    public static let defaultTimeout = Duration.milliseconds(2_000)

    /// Reads `{"kind": "discover" | "query", "objectTypes"?, "coreTypes"?, "objectId"?, "externalId"?,
    /// "objectFilter"?, "timeout"?}`.
    /// - Parameter body: The JSON body.
    /// - Throws: ``Invalid`` when it is not JSON, names no known kind, or the payload is not a valid Discover or
    ///   Query (the protocol's own checks: exactly one of the type lists for a Query, a valid ObjectFilter, …).
    public init(body: [UInt8]) throws(Invalid) {
        let json: JSONObject
        do {
            guard let object = try JSONValue(parsing: body).objectValue else {
                throw Invalid(description: "the request must be a JSON object")
            }
            json = object
        } catch let error as Invalid {
            throw error
        } catch {
            throw Invalid(description: "the request is not JSON: \(error)")
        }
        var milliseconds = 2_000.0
        if let timeout = json["timeout"] {
            guard let value = timeout.doubleValue, value >= 100, value <= 30_000 else {
                throw Invalid(description: "'timeout' must be a number of milliseconds from 100 to 30000")
            }
            milliseconds = value
        }
        self.timeout = .milliseconds(Int64(milliseconds))
        var payload = JSONObject()
        for key in ["objectTypes", "coreTypes"] {
            guard let value = json[key] else { continue }
            guard let list = value.arrayValue, list.allSatisfy({ $0.stringValue?.isEmpty == false }) else {
                throw Invalid(description: "'\(key)' must be an array of non-empty strings")
            }
            if !list.isEmpty { payload[key] = value }
        }
        switch json["kind"]?.stringValue {
        case "discover":
            for key in ["objectId", "externalId"] {
                guard let value = json[key] else { continue }
                guard let text = value.stringValue else { throw Invalid(description: "'\(key)' must be a string") }
                if !text.isEmpty { payload[key] = value }
            }
            if json["objectFilter"] != nil { throw Invalid(description: "a Discover takes no 'objectFilter'") }
            do {
                request = .discover(try DiscoverEventData(json: payload, registry: CoatyObjectRegistry()))
            } catch {
                throw Invalid(description: "not a valid Discover: \(error)")
            }
        case "query":
            if json["objectId"] != nil || json["externalId"] != nil {
                throw Invalid(description: "a Query takes no 'objectId' or 'externalId'; use 'objectFilter'")
            }
            payload["objectFilter"] = json["objectFilter"] ?? .object([:])
            guard payload["objectFilter"]?.objectValue != nil else {
                throw Invalid(description: "'objectFilter' must be a JSON object (an ObjectFilter)")
            }
            let data: QueryEventData
            do {
                data = try QueryEventData(json: payload, registry: CoatyObjectRegistry())
            } catch {
                throw Invalid(description: "not a valid Query: \(error)")
            }
            guard data.objectFilter != nil else {
                throw Invalid(description: "'objectFilter' is not a valid ObjectFilter")
            }
            request = .query(data)
        case let kind?:
            throw Invalid(description: "unknown kind '\(kind)': use 'discover' or 'query'")
        case nil:
            throw Invalid(description: "'kind' is missing: use 'discover' or 'query'")
        }
    }

    /// Sends the request and collects every answer until the timeout.
    /// - Parameters:
    ///   - manager: The viewer's communication manager (connected).
    ///   - names: Agent names by identity id, to label the answers.
    /// - Returns: `{"kind", "elapsed", "responses": [{"sourceId", "sourceName"?, "latency", "objects"}]}`.
    /// - Throws: An error of the manager (not connected, …).
    public func ask(_ manager: CommunicationManager, names: @Sendable (String) -> String?) async throws -> JSONValue {
        let start = ContinuousClock.now
        /// Milliseconds since `start`, to a microsecond.
        func elapsed() -> Double { ((ContinuousClock.now - start) / .microseconds(1)).rounded() / 1_000 }
        var responses: [JSONValue] = []
        func answer(_ sourceId: CoatyUUID, _ objects: [JSONValue]) {
            var json = JSONObject()
            json["sourceId"] = .string(sourceId.description)
            if let name = names(sourceId.description) { json["sourceName"] = .string(name) }
            json["latency"] = .double(elapsed())
            json["objects"] = .array(objects)
            responses.append(.object(json))
        }
        let kind: String
        switch request {
        case .discover(let data):
            kind = "discover"
            for try await resolve in manager.publishDiscover(data).responses(timeout: timeout) {
                let json = resolve.data.json
                let objects = (json["object"].map { [$0] } ?? []) + (json["relatedObjects"]?.arrayValue ?? [])
                answer(resolve.sourceId, objects)
            }
        case .query(let data):
            kind = "query"
            for try await retrieve in manager.publishQuery(data).responses(timeout: timeout) {
                answer(retrieve.sourceId, retrieve.data.json["objects"]?.arrayValue ?? [])
            }
        }
        return .object([
            "kind": .string(kind),
            "elapsed": .double((elapsed() * 10).rounded() / 10),
            "responses": .array(responses),
        ])
    }
}
