import CoatyCore
public import Prometheus

/// An HTTP response of the operator endpoint, before it is written.
public struct OperatorResponse: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// The `Content-Type`.
    public var contentType: String
    /// The body.
    public var body: [UInt8]
    /// Further headers (e.g. `Allow` of a 405).
    public var headers: [String: String]

    /// A response.
    /// - Parameters:
    ///   - status: the status code.
    ///   - contentType: the `Content-Type`.
    ///   - body: the body.
    ///   - headers: further headers.
    public init(status: Int, contentType: String, body: [UInt8], headers: [String: String] = [:]) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }
}

/// The routes of an ``OperatorEndpoint``, apart from the socket: what each request is answered
/// with.
///
/// | path | answer |
/// | --- | --- |
/// | `GET /metrics` | 200, the registry in Prometheus text format 0.0.4 |
/// | `GET /health/live` | 200 `{"status":"live"}` while the process serves at all |
/// | `GET /health/ready` | 200 `{"status":"ready"}`, or 503 `{"status":"not ready","reason":"…"}` |
/// | another path | 404 |
/// | another method on these paths | 405 (`HEAD` is answered like `GET`, without a body) |
public struct OperatorRoutes: Sendable {
    /// The content type of `/metrics`.
    public static let metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The metrics served.
    public let registry: PrometheusCollectorRegistry
    /// The readiness check of `/health/ready`.
    public let readiness: @Sendable () async -> OperatorReadiness

    /// Routes over `registry` and `readiness`.
    /// - Parameters:
    ///   - registry: the metrics served by `/metrics`.
    ///   - readiness: the check of `/health/ready`, called once per request.
    public init(registry: PrometheusCollectorRegistry, readiness: @escaping @Sendable () async -> OperatorReadiness) {
        self.registry = registry
        self.readiness = readiness
    }

    /// The response to a request.
    /// - Parameters:
    ///   - method: the HTTP method, e.g. `GET`.
    ///   - uri: the request target; a query string is ignored.
    /// - Returns: the response (with a body also for `HEAD`; the server leaves it out).
    public func respond(method: String, uri: String) async -> OperatorResponse {
        let path =
            uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        let known = ["/metrics", "/health/live", "/health/ready"]
        guard known.contains(path) else {
            return Self.json(404, #"{"status":"not found","paths":["/metrics","/health/live","/health/ready"]}"#)
        }
        guard method == "GET" || method == "HEAD" else {
            var response = Self.json(405, #"{"status":"method not allowed"}"#)
            response.headers["Allow"] = "GET, HEAD"
            return response
        }
        switch path {
        case "/metrics":
            var body: [UInt8] = []
            registry.emit(into: &body)
            return OperatorResponse(status: 200, contentType: Self.metricsContentType, body: body)
        case "/health/live":
            return Self.json(200, #"{"status":"live"}"#)
        default:
            let readiness = await readiness()
            if readiness.isReady { return Self.json(200, #"{"status":"ready"}"#) }
            let body: JSONValue = ["status": "not ready", "reason": .string(readiness.reason ?? "unknown")]
            return Self.json(503, body.serializedString())
        }
    }

    private static func json(_ status: Int, _ text: String) -> OperatorResponse {
        OperatorResponse(status: status, contentType: "application/json", body: Array((text + "\n").utf8))
    }
}
