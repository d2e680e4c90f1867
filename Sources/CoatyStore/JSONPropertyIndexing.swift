/// A store that can index a top-level JSON property of the items of one collection, so that
/// ordered, paged reads of that collection walk the index instead of sorting (the SQLite backend).
public protocol JSONPropertyIndexing: Sendable {
    /// Creates the index (once; later calls do nothing).
    /// - Parameters:
    ///   - collection: the collection (a Coaty object's collection is its object type).
    ///   - property: a top-level property named with letters, digits and `_`.
    /// - Throws: for another property name, or a backend error.
    func createIndex(collection: String, property: String) async throws

    /// Whether such an index exists.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - property: the property.
    /// - Returns: `true` when it was created.
    func hasIndex(collection: String, property: String) -> Bool
}
